"""`cronwheel api` as a real process for the CLI's end-to-end tests: one per test, or one
per test file with the store put back before each test as the server found it.

A start costs about 1.3 s of CPU (an interpreter and the API's imports), more than most
of these tests' own work; the CLI files ran some 45 of them. A test file that asks for
``api_url`` from :func:`api_url_per_module` shares one server, per backend, and each of
its tests begins on the store as it was right after that server answered: every table
emptied and refilled from a copy taken then (SQLite), or the store's own test reset
(PostgreSQL). The API process keeps nothing of a test in memory that a later test could
meet: its only cache (tenants' create rates, cronwheel/web/quotas.py) is checked against
the store before it refuses anything. A test that needs a server of its own (it reads
the server's log from its start, or drops its database) asks for
:func:`api_url_per_test`'s fixture instead.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.conftest import BACKENDS
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.procs import free_port, wait_until

TOKEN = "admin-token-for-the-cli-tests"
SECRETS_KEY = "t3QxM0VYbZ8p2m5Jc7uF1dR9sW4yK6hL0aN8eG2vB5o="
"""The API's key for secret webhook headers (docs/security.md#secrets-at-rest)."""


@contextmanager
def running_api(store_url: str, log: Path) -> Iterator[str]:
    """``cronwheel api`` on ``store_url`` with the admin token, until the block ends."""
    port = free_port()
    args = ["api", "--db", store_url, "--port", str(port), "--admin-token", TOKEN]
    args += ["--secrets-key", SECRETS_KEY]
    with cronwheel_proc(*args, log=log) as proc:
        url = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(
                    f"cronwheel api exited ({proc.returncode}):\n{log.read_text()}"
                )
            return httpx.get(f"{url}/readyz", timeout=1).status_code == 200

        wait_until("cronwheel api answers", ready, 60, [log])
        yield url


@pytest.fixture(name="api_url")
def api_url_per_test(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A ``cronwheel api`` of the test's own, on its ``store_url``; its log is
    ``tmp_path / "api.log"``."""
    with running_api(store_url, tmp_path / "api.log") as url:
        yield url


@dataclass
class SharedApi:
    """A module's ``cronwheel api`` and how to put its store back as it found it."""

    url: str
    store_url: str
    log: Path
    copy: Path | None
    """SQLite: the store as it was once the server answered (``VACUUM INTO``)."""

    def put_back(self) -> None:
        if self.copy is None:
            asyncio.run(_truncate_postgres(self.store_url))
            return
        path = self.store_url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path, timeout=30, isolation_level=None)) as db:
            db.execute("ATTACH DATABASE ? AS copy", (str(self.copy),))
            tables = [
                name
                for (name,) in db.execute(
                    "SELECT name FROM copy.sqlite_master WHERE type = 'table'"
                    " AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations'"
                )
            ]
            db.execute("BEGIN IMMEDIATE")
            for table in tables:
                # Generated columns (table_xinfo's hidden 2 and 3) are computed, not copied.
                names = ", ".join(
                    f'"{column[1]}"'
                    for column in db.execute(f'PRAGMA copy.table_xinfo("{table}")')
                    if column[6] == 0
                )
                db.execute(f'DELETE FROM main."{table}"')
                db.execute(
                    f'INSERT INTO main."{table}" ({names}) SELECT {names} FROM copy."{table}"'
                )
            db.execute("COMMIT")
            db.execute("DETACH DATABASE copy")


async def _truncate_postgres(dsn: str) -> None:
    from cronwheel.store.postgres import PostgresStore

    store = await PostgresStore.connect(dsn)
    try:
        await store.truncate_all_for_tests()
    finally:
        await store.close()


@pytest.fixture(scope="module", params=BACKENDS)
def api_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A store of each backend for a module's shared server (tests/tiers.py's
    STORE_PARAMS names it: one store unless the test is marked ``both_stores``)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('api') / 'e2e.db'}"
        return
    request.getfixturevalue("pg_dsn")  # fails in CI, skips elsewhere, if PostgreSQL is down
    name, dsn = pg.create_database("cronwheel_e2e")
    try:
        yield dsn
    finally:
        pg.drop_database(name)


@pytest.fixture(scope="module")
def shared_api(api_store: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedApi]:
    folder = tmp_path_factory.mktemp("api-server")
    log = folder / "api.log"
    with running_api(api_store, log) as url:
        copy = None
        if api_store.startswith("sqlite:///"):
            copy = folder / "as-started.db"
            with closing(sqlite3.connect(api_store.removeprefix("sqlite:///"))) as db:
                db.execute("VACUUM INTO ?", (str(copy),))
        yield SharedApi(url, api_store, log, copy)


@pytest.fixture(name="api_url")
def api_url_per_module(shared_api: SharedApi) -> str:
    """The module's ``cronwheel api``, its store as the server found it."""
    shared_api.put_back()
    return shared_api.url
