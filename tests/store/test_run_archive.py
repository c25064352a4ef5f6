"""History that grows forever, bounded (issue 18 item 4, decision 0032): finished runs
archived out of the live tables into time-partitioned history, reads unchanged by the
move, retention by dropping partitions, an occurrence materialised once across both.

The reads are conformance (both stores: SQLite archives nothing, so its answers must be
the same too); the move itself, its partitions and its races exist on PostgreSQL only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cronwheel.core.model import RunState, new_id
from cronwheel.store.conformance.factories import at, make_job, make_run, succeeded
from cronwheel.store.conformance.housekeeping.run_archive import (
    RunArchiveContract,
    _archive,
    _count,
    _finish,
    _partitions,
    _sql,
    pg,
)


@pytest.fixture
async def pg_store2(pg_store: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A second PostgreSQL store on the same database: another maintenance process."""
    from cronwheel.store.postgres import PostgresStore

    other = await PostgresStore.connect(request.getfixturevalue("pg_dsn"))
    try:
        yield other
    finally:
        await other.close()


class TestRunArchive(RunArchiveContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


@pg
async def test_only_settled_finished_runs_move(pg_store: Any) -> None:
    job = make_job(pool="p")
    await pg_store.create_jobs([job])
    done = await _finish(pg_store, job, [(0, RunState.SUCCEEDED), (5, RunState.SUCCEEDED)])
    await pg_store.materialize_runs([make_run(job, at(-1)), make_run(job, at(-2))], [])
    [running] = await pg_store.claim_runs(
        "w", ["p"], limit=1, now=at(6), prefetch_until=at(6), lease_seconds=600
    )
    # The settle time (10 s) has not passed for either finished run.
    assert await _archive(pg_store, at(9.9)) == 0
    # 10 s after the first: it moves; the second, finished at 5 s, stays.
    assert await _archive(pg_store, at(10.5)) == 1
    assert [r[0] for r in await _sql(pg_store, "SELECT id FROM run_history")] == [done[0]]
    # Much later: every finished run has moved, the running and pending ones never do.
    assert await _archive(pg_store, at(3600), settle_seconds=10) == 1
    live = await _sql(pg_store, "SELECT id, state FROM runs ORDER BY id")
    assert {r["state"] for r in live} == {"running", "pending"}
    assert running.run.id in {r["id"] for r in live}


@pg
async def test_a_run_cancelled_before_its_occurrence_waits_for_it(pg_store: Any) -> None:
    job = make_job(pool="p")
    await pg_store.create_jobs([job])
    await pg_store.materialize_runs([make_run(job, at(100))], [])
    [run] = await pg_store.list_runs("default", job_id=job.id)
    await pg_store.cancel_run("default", run.id, now=at(0), actor="ops")
    # Finished long ago, but its occurrence is ahead: a scheduler may still reach it, and
    # runs' unique index must keep seeing it.
    assert await _archive(pg_store, at(50)) == 0
    assert await _archive(pg_store, at(111)) == 1


@pg
async def test_task_runs_of_a_live_pipeline_run_stay(pg_store: Any) -> None:
    job = make_job(pool="p")
    await pg_store.create_jobs([job])
    ids = await _finish(pg_store, job, [(0, RunState.SUCCEEDED), (1, RunState.SUCCEEDED)])
    pipeline_run = new_id()
    await _sql(
        pg_store,
        "INSERT INTO pipeline_runs (id, tenant_id, pipeline_id, version, job_id, state, actor,"
        " created_at) VALUES ($1, 'default', $2, 1, $3, 'running', 'ops', $4)",
        pipeline_run,
        new_id(),
        job.id,
        at(0),
    )
    await _sql(pg_store, "UPDATE runs SET pipeline_run_id = $1 WHERE id = $2", pipeline_run, ids[0])
    # The engine still reads the finished task run's result from runs: it stays.
    assert await _archive(pg_store, at(60)) == 1
    assert [r[0] for r in await _sql(pg_store, "SELECT id FROM runs")] == [ids[0]]
    await _sql(
        pg_store,
        "UPDATE pipeline_runs SET state = 'succeeded', finished_at = $2 WHERE id = $1",
        pipeline_run,
        at(61),
    )
    assert await _archive(pg_store, at(62)) == 1
    assert await _count(pg_store, "runs") == 0


@pg
async def test_partitions_are_created_ahead(pg_store: Any) -> None:
    await _archive(pg_store, at(30), partitions_ahead=3)
    suffixes = [name.removeprefix("run_history_") for name in await _partitions(pg_store)]
    assert suffixes == [
        "default",
        "p20300101t120000_20300101t120100",
        "p20300101t120100_20300101t120200",
        "p20300101t120200_20300101t120300",
        "p20300101t120300_20300101t120400",
    ]
    # attempt_history has the same bounds; a later pass adds only what is missing.
    attempt_parts = await _sql(
        pg_store,
        "SELECT count(*) FROM pg_inherits WHERE inhparent = 'attempt_history'::regclass",
    )
    assert attempt_parts[0][0] == 5
    await _archive(pg_store, at(70), partitions_ahead=3)
    assert len(await _partitions(pg_store)) == 6
    # The default partitions say they hold only what finished before the first partition:
    # creating the next ones need not scan them under an exclusive lock.
    checks = await _sql(
        pg_store,
        "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conname LIKE '%_default_before_partitions' ORDER BY 1",
    )
    assert [(table, "2030-01-01 12:00:00" in check) for table, check in checks] == [
        ("attempt_history_default", True),
        ("run_history_default", True),
    ]


@pg
async def test_retention_drops_partitions_without_deleting_rows(pg_store: Any) -> None:
    job = make_job(pool="p")
    await pg_store.create_jobs([job])
    # Partitions from 12:00 on; runs finished in the first minute and in the second.
    await _archive(pg_store, at(0))
    first = await _finish(pg_store, job, [(10, RunState.SUCCEEDED), (20, RunState.DEAD)])
    second = await _finish(pg_store, job, [(70, RunState.SUCCEEDED)])
    assert await _archive(pg_store, at(100)) == 3
    gone = "p20300101t120000_20300101t120100"
    assert f"run_history_{gone}" in await _partitions(pg_store)
    kept_before = await _sql(pg_store, "SELECT * FROM run_history_p20300101t120100_20300101t120200")
    # A cutoff inside the second minute: the first partition ends before it, and goes.
    assert await pg_store.delete_history(before=at(90)) == 0  # no row was deleted
    for table in ("run_history", "attempt_history"):
        [row] = await _sql(pg_store, "SELECT to_regclass($1) IS NULL", f"{table}_{gone}")
        assert row[0], f"{table}_{gone} still exists"
    assert all([await pg_store.get_run("default", i) is None for i in first])
    assert await pg_store.get_run("default", second[0]) is not None
    after = await _sql(pg_store, "SELECT * FROM run_history_p20300101t120100_20300101t120200")
    assert after == kept_before
    assert len(await pg_store.list_attempts("default", second[0])) == 1


@pg
async def test_retention_deletes_rows_of_the_default_partition(pg_store: Any) -> None:
    job = make_job(pool="p")
    await pg_store.create_jobs([job])
    # Finished before any partition existed (an upgrade's backlog): the default partition.
    old = await _finish(pg_store, job, [(-3600, RunState.SUCCEEDED), (-1800, RunState.DEAD)])
    assert await _archive(pg_store, at(0)) == 2
    assert await _count(pg_store, "run_history_default") == 2
    assert await pg_store.delete_history(before=at(-2000)) == 1
    assert await pg_store.get_run("default", old[0]) is None
    assert await pg_store.get_run("default", old[1]) is not None
    assert await _count(pg_store, "attempt_history_default") == 1


@pg
async def test_two_maintenance_passes_move_each_run_once(pg_store: Any, pg_store2: Any) -> None:
    jobs = [make_job(pool="p") for _ in range(4)]
    await pg_store.create_jobs(jobs)
    n = 0
    for job in jobs:
        await pg_store.materialize_runs([make_run(job, at(-300 + i)) for i in range(150)], [])
        n += 150
    claimed = await pg_store.claim_runs(
        "w", ["p"], limit=n, now=at(0), prefetch_until=at(0), lease_seconds=600
    )
    await pg_store.complete_runs([succeeded(c, at(0)) for c in claimed])

    async def drain(store: Any) -> int:
        total = 0
        while moved := await _archive(store, at(30), limit=37):
            total += moved
        return total

    first, second = await asyncio.gather(drain(pg_store), drain(pg_store2))
    assert first + second == n
    [row] = await _sql(pg_store, "SELECT count(*), count(DISTINCT id) FROM run_history")
    assert tuple(row) == (n, n)
    [row] = await _sql(pg_store, "SELECT count(*), count(DISTINCT run_id) FROM attempt_history")
    assert tuple(row) == (n, n)
    assert await _count(pg_store, "runs") == 0 and await _count(pg_store, "attempts") == 0


async def test_reads_of_history_while_partitions_come_and_go_never_deadlock(
    pg_store: Any, pg_store2: Any
) -> None:
    """Creating and dropping partitions locks their parent exclusively: with one table's
    locks held while waiting for the other's, reads of all_runs and all_attempts
    deadlocked with it (CI, 2026-11-25). They may wait a moment; they never fail."""
    job = make_job()
    await pg_store.create_jobs([job], [make_run(job, at(-5))])
    stop = asyncio.Event()

    async def read() -> int:
        reads = 0
        while not stop.is_set():
            runs = await pg_store2.list_runs("default", limit=10)
            await pg_store2.list_attempts("default", runs[0].id)
            reads += 1
        return reads

    readers = [asyncio.create_task(read()) for _ in range(3)]
    try:
        for step in range(40):  # each pass a new partition pair, and one dropped
            await _archive(pg_store, at(step), partition_seconds=1, partitions_ahead=1)
            await pg_store.delete_history(before=at(step - 3), limit=10)
    finally:
        stop.set()
    assert all(n > 0 for n in await asyncio.gather(*readers))
