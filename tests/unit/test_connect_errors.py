"""What each way of failing to open PostgreSQL is told as (the server here trusts every
user, so a wrong password cannot be provoked for real: tests/e2e/test_store_errors.py
covers the rest with real processes)."""

from __future__ import annotations

import socket

import asyncpg
import pytest

from cronwheel.errors import CronwheelError, InvalidInput, StoreUnavailable
from cronwheel.store.postgres._connect import connect_error, database_name, where

DSN = "postgresql://app:hunter2-secret@db.internal:6543/jobs"


@pytest.mark.parametrize(
    ("exc", "kind", "words"),
    [
        (
            asyncpg.InvalidPasswordError('password authentication failed for user "app"'),
            StoreUnavailable,
            ['refused the password of user "app"', "db.internal:6543", "--db"],
        ),
        (
            asyncpg.InvalidCatalogNameError('database "jobs" does not exist'),
            StoreUnavailable,
            ['database "jobs" does not exist', "--create-database", "app:***@db.internal"],
        ),
        (
            ConnectionRefusedError(111, "Connection refused"),
            StoreUnavailable,
            ["Connection refused"],
        ),
        (socket.gaierror(-2, "Name or service not known"), StoreUnavailable, ["check the host"]),
        (TimeoutError(), StoreUnavailable, ["did not answer"]),
        (ValueError("invalid port"), InvalidInput, ["not a usable PostgreSQL URL"]),
    ],
)
def test_each_failure_is_one_sentence_without_the_password(
    exc: BaseException, kind: type[CronwheelError], words: list[str]
) -> None:
    error = connect_error(exc, DSN)
    assert isinstance(error, kind)
    for word in words:
        assert word in str(error)
    assert "hunter2" not in str(error) and "\n" not in str(error)


def test_where_and_database_name() -> None:
    assert where(DSN) == "db.internal:6543"
    assert where("postgresql:///jobs") == "localhost:5432"
    assert database_name(DSN) == "jobs"
    assert database_name("postgresql://h/") is None
    assert database_name("postgresql://h/my%20db") == "my db"
