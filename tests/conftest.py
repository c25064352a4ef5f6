"""Shared fixtures: the backends every store-facing test runs against."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from cronwheel.engine import eventloop
from cronwheel.store.base import Store
from tests import pg, tiers

BACKENDS = ["sqlite", "postgres"]
_pg_skipped: list[str] = []


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every async test runs on the loop cronwheel's processes run on (its turns bounded,
    urgent work first: cronwheel.engine.eventloop), not asyncio's default one."""
    return {"cronwheel": eventloop.new_event_loop}


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


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.x) sorts a --dist loadfile queue by each file's number of tests, most
    # first, unless told not to: the slow tiers' files, with few tests each, then started
    # last, after the unit tier's, and left one process working alone at the end. The
    # order of pytest_collection_modifyitems below is the one wanted.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    one_store = tiers.stores_for_one_store_tiers()
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    tier_of: dict[pytest.Item, str] = {}
    for item in items:
        tier = tier_of[item] = tiers.tier_of(item.path)
        item.add_marker(getattr(pytest.mark, tier))
        # The cluster suite kills processes, restarts PostgreSQL, saturates the cores and
        # bounds how long a failover takes: it must have the machine to itself, so
        # scripts/test runs it alone, after the rest; but for the tests marked
        # beside_others, which time nothing and share nothing (decision 0038).
        if item.path.is_relative_to(SERIAL) and item.get_closest_marker("beside_others") is None:
            item.add_marker(pytest.mark.serial)
        if (
            tier in ("service", "process")
            and _backend(item) not in (None, *one_store)
            and item.get_closest_marker("both_stores") is None
        ):
            dropped.append(item)
            continue
        kept.append(item)
    # The slow tiers first: a file is one unit of work for xdist (--dist loadfile), and
    # long files started last would leave one process working alone at the end.
    kept.sort(key=lambda item: _ORDER[tier_of[item]])
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


_ORDER = {"process": 0, "service": 1, "contract": 2, "unit": 3}


def _backend(item: pytest.Item) -> str | None:
    """The backend a parametrised test runs on, if any."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in tiers.STORE_PARAMS:
        if params.get(name) in tiers.BACKENDS:
            return str(params[name])
    return None


class IOInUnitTier(AssertionError):
    """A unit test reached for the network or a process: it belongs in another tier."""


@pytest.fixture(autouse=True)
def _unit_tier_does_no_io(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: object, **kwargs: object) -> NoReturn:
        raise IOInUnitTier(
            f"{request.node.nodeid} is a unit test (tests/tiers.py) but opened a socket"
            " or a process: move it to a tier that may"
        )

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _pg_skipped:
        terminalreporter.write_line(
            f"PostgreSQL suites SKIPPED: {_pg_skipped[0]}. Only the SQLite store was tested.",
            yellow=True,
        )
