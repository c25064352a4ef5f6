"""Shared fixtures: the backends every store-facing test runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cronwheel.store.base import Store
from tests import pg

BACKENDS = ["sqlite", "postgres"]
_pg_skipped: list[str] = []


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    reason = pg.unreachable_reason()
    if reason is not None:
        if pg.REQUIRED:
            pytest.fail(f"{reason}; CI requires the PostgreSQL suites to run", pytrace=False)
        _pg_skipped.append(reason)
        pytest.skip(reason)
    name, dsn = pg.create_database()
    try:
        yield dsn
    finally:
        pg.drop_database(name)


async def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if backend == "sqlite":
        from cronwheel.store.sqlite import SqliteStore

        store: Store = await SqliteStore.open(tmp_path / "cronwheel.db")
        await store.migrate()
        return store
    from cronwheel.store.postgres import PostgresStore

    dsn = request.getfixturevalue("pg_dsn")
    pg_store = await PostgresStore.connect(dsn)
    await pg_store.migrate()
    await pg_store.truncate_all_for_tests()
    return pg_store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A migrated, empty store of each backend."""
    s = await open_store(request.param, request, tmp_path)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
async def store2(
    store: Store, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Store]:
    """A second, independent store on the same database: another process's view."""
    if store.__class__.__name__ == "SqliteStore":
        from cronwheel.store.sqlite import SqliteStore

        other: Store = await SqliteStore.open(tmp_path / "cronwheel.db")
    else:
        from cronwheel.store.postgres import PostgresStore

        other = await PostgresStore.connect(request.getfixturevalue("pg_dsn"))
    try:
        yield other
    finally:
        await other.close()


SERIAL = Path(__file__).parent / "cluster"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The cluster suite kills processes, restarts PostgreSQL and drives 2,000 runs a second:
    # it must have the machine to itself, so scripts/test runs it alone, after the rest.
    for item in items:
        if item.path.is_relative_to(SERIAL):
            item.add_marker(pytest.mark.serial)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _pg_skipped:
        terminalreporter.write_line(
            f"PostgreSQL suites SKIPPED: {_pg_skipped[0]}. Only the SQLite store was tested.",
            yellow=True,
        )
