"""Maintenance vacuums the live tables when the server's autovacuum does not (decision
0032): ``runs`` and ``attempts`` past their dead-tuple threshold get a plain ``VACUUM``,
one process at a time, never waiting behind a lock and never in the hot path's way.

PostgreSQL's statistics are flushed by each backend on its own schedule; the tests force
every pooled connection to flush before they read them (``pg_stat_force_next_flush``), so
that what a pass sees is what the test did.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from cronwheel.core.clock import FrozenClock
from cronwheel.engine.maintenance import Maintenance, MaintenanceConfig
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run, succeeded
from tests.conftest import open_store

RUNS = 40  # each leaves 3 dead tuples in runs (claim, completion, archive) and 1 in attempts


@pytest.fixture
async def pg_store(pg_store: Any) -> Any:
    """The migrated, empty PostgreSQL store (tests/store/conftest.py), its statistics
    flushed: the truncate's reset lands before the test's own counts."""
    await _flush_stats(pg_store)
    return pg_store


@pytest.fixture
async def other_conn(pg_store: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A plain connection to the same database: another session."""
    conn = await asyncpg.connect(request.getfixturevalue("pg_dsn"))
    try:
        yield conn
    finally:
        await conn.close()


async def _flush_stats(store: Any) -> None:
    """Every pooled connection flushes its pending statistics now: each is held at once
    (so each is a different one) and asked to flush before it reports ready."""
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(store._pool.get_max_size()):
            conn = await stack.enter_async_context(store._pool.acquire())
            await conn.execute("SELECT pg_stat_force_next_flush()")


async def _stats(store: Any) -> dict[str, Any]:
    async with store._connection() as conn:
        found = await conn.fetch(
            "SELECT relname, n_live_tup, n_dead_tup, vacuum_count, last_vacuum"
            " FROM pg_stat_user_tables WHERE relname IN ('runs', 'attempts')"
        )
    return {r["relname"]: dict(r) for r in found}


async def _finished_and_archived(store: Store, n: int = RUNS) -> None:
    """``n`` runs scheduled, claimed, succeeded at second 0, and archived at second 60."""
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(-30 + i / 1000)) for i in range(n)], [])
    claimed = await store.claim_runs(
        "w", [job.pool], limit=n, now=at(0), prefetch_until=at(0), lease_seconds=60
    )
    assert len(claimed) == n
    await store.complete_runs([succeeded(c, at(0), lag_seconds=0.0) for c in claimed])
    moved = await store.archive_runs(now=at(60), partition_seconds=60.0, limit=10 * n)
    assert moved == (0 if store.__class__.__name__ == "SqliteStore" else n)


def _maintenance(store: Store, **config: Any) -> Maintenance:
    config.setdefault("retention_days", None)
    config.setdefault("history_partition_seconds", 60.0)
    return Maintenance(store, clock=FrozenClock(at(60)), config=MaintenanceConfig(**config))


async def test_a_pass_vacuums_the_live_tables_past_their_threshold_only(pg_store: Any) -> None:
    await _finished_and_archived(pg_store)
    await _flush_stats(pg_store)
    before = await _stats(pg_store)
    assert before["runs"]["n_dead_tup"] >= 3 * RUNS
    assert RUNS <= before["attempts"]["n_dead_tup"] < 60

    result = await _maintenance(pg_store, vacuum_min_dead_tuples=60).run_once()

    [vacuum] = result.vacuumed  # attempts' 40 dead tuples are below the 60
    assert (vacuum.table, vacuum.skipped) == ("runs", None)
    assert vacuum.dead_tuples == before["runs"]["n_dead_tup"]
    after = await _stats(pg_store)
    assert after["runs"]["vacuum_count"] == before["runs"]["vacuum_count"] + 1
    assert after["runs"]["last_vacuum"] is not None
    assert after["runs"]["n_dead_tup"] < 60
    assert after["attempts"]["vacuum_count"] == before["attempts"]["vacuum_count"]
    assert after["attempts"]["n_dead_tup"] == before["attempts"]["n_dead_tup"]


async def test_below_the_threshold_a_pass_only_reads_statistics(pg_store: Any) -> None:
    await _finished_and_archived(pg_store)
    await _flush_stats(pg_store)
    before = await _stats(pg_store)

    result = await _maintenance(pg_store, vacuum_min_dead_tuples=1_000).run_once()
    assert result.vacuumed == []
    result = await _maintenance(pg_store, vacuum_min_dead_tuples=10, vacuum=False).run_once()
    assert result.vacuumed == []

    after = await _stats(pg_store)
    for table in ("runs", "attempts"):
        assert after[table]["vacuum_count"] == before[table]["vacuum_count"]
        assert after[table]["n_dead_tup"] == before[table]["n_dead_tup"]


async def test_the_threshold_grows_with_the_live_tuples(pg_store: Any) -> None:
    """120 dead tuples beside 500 pending runs: below half the live ones, above a fifth."""
    await _finished_and_archived(pg_store)
    backlog = make_job()
    await pg_store.create_jobs([backlog])
    await pg_store.materialize_runs([make_run(backlog, at(100 + i)) for i in range(500)], [])
    await _flush_stats(pg_store)

    half = _maintenance(pg_store, vacuum_min_dead_tuples=60, vacuum_dead_fraction=0.5)
    assert (await half.run_once()).vacuumed == []
    fifth = _maintenance(pg_store, vacuum_min_dead_tuples=60, vacuum_dead_fraction=0.2)
    [vacuum] = (await fifth.run_once()).vacuumed
    assert (vacuum.table, vacuum.skipped, vacuum.live_tuples) == ("runs", None, 500)


async def test_a_busy_table_lock_is_skipped_without_waiting(pg_store: Any, other_conn: Any) -> None:
    """Another vacuum (or an ANALYZE, a migration) holds the table's lock: the pass goes
    on at once, and the next one tries again."""
    await _finished_and_archived(pg_store)
    await _flush_stats(pg_store)
    before = await _stats(pg_store)
    async with other_conn.transaction():
        await other_conn.execute("LOCK TABLE runs IN SHARE UPDATE EXCLUSIVE MODE")
        result = await asyncio.wait_for(
            _maintenance(pg_store, vacuum_min_dead_tuples=60).run_once(), timeout=30
        )
    [vacuum] = result.vacuumed
    assert (vacuum.table, vacuum.busy) == ("runs", True)
    assert vacuum.skipped is not None
    assert (await _stats(pg_store))["runs"]["vacuum_count"] == before["runs"]["vacuum_count"]

    [vacuum] = (await _maintenance(pg_store, vacuum_min_dead_tuples=60).run_once()).vacuumed
    assert (vacuum.table, vacuum.skipped) == ("runs", None)


async def test_one_process_vacuums_at_a_time(pg_store: Any, other_conn: Any) -> None:
    """A process that cannot take the vacuum lock at once leaves the tables to the one
    that holds it."""
    from cronwheel.store.postgres._vacuum import VACUUM_LOCK

    await _finished_and_archived(pg_store)
    await _flush_stats(pg_store)
    before = await _stats(pg_store)
    await other_conn.execute("SELECT pg_advisory_lock($1)", VACUUM_LOCK)
    try:
        assert await pg_store.vacuum_live_tables(min_dead_tuples=60) == []
    finally:
        await other_conn.execute("SELECT pg_advisory_unlock($1)", VACUUM_LOCK)
    assert (await _stats(pg_store))["runs"]["vacuum_count"] == before["runs"]["vacuum_count"]
    [vacuum] = await pg_store.vacuum_live_tables(min_dead_tuples=60)
    assert (vacuum.table, vacuum.skipped) == ("runs", None)


async def test_a_vacuum_and_the_hot_path_do_not_wait_for_each_other(
    pg_store: Any, other_conn: Any
) -> None:
    """The vacuum runs while a completion's transaction holds its row locks, and claims
    and completions go on while another session holds the lock a vacuum takes."""
    await _finished_and_archived(pg_store)
    live = make_job()
    await pg_store.create_jobs([live])
    await pg_store.materialize_runs([make_run(live, at(61)), make_run(live, at(62))], [])
    await _flush_stats(pg_store)

    async with other_conn.transaction():  # a write in flight on both live tables
        await other_conn.execute(
            "UPDATE runs SET priority = priority WHERE scheduled_for = $1", at(61)
        )
        await other_conn.execute("DELETE FROM attempts WHERE false")
        found = await asyncio.wait_for(pg_store.vacuum_live_tables(min_dead_tuples=60), timeout=30)
    assert [(v.table, v.skipped) for v in found] == [("runs", None)]

    async with other_conn.transaction():  # what a vacuum holds, for as long as it runs
        await other_conn.execute("LOCK TABLE runs, attempts IN SHARE UPDATE EXCLUSIVE MODE")
        claimed = await asyncio.wait_for(
            pg_store.claim_runs(
                "w", [live.pool], limit=2, now=at(62), prefetch_until=at(62), lease_seconds=60
            ),
            timeout=30,
        )
        completed = await asyncio.wait_for(
            pg_store.complete_runs([succeeded(c, at(62), lag_seconds=0.0) for c in claimed]),
            timeout=30,
        )
    assert len(claimed) == 2
    assert sorted(completed) == sorted(c.run.id for c in claimed)


async def test_sqlite_has_nothing_to_vacuum(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    store = await open_store("sqlite", request, tmp_path)
    try:
        await _finished_and_archived(store)
        assert await store.vacuum_live_tables(min_dead_tuples=0, dead_fraction=0.0) == []
        result = await _maintenance(store, vacuum_min_dead_tuples=0).run_once()
        assert result.vacuumed == []
    finally:
        await store.close()
