"""History that grows forever, bounded (issue 18 item 4, decision 0032): finished runs
archived out of the live tables into time-partitioned history, reads unchanged by the
move, retention by dropping partitions, an occurrence materialised once across both.

The reads are conformance (both stores: SQLite archives nothing, so its answers must be
the same too); the move itself, its partitions and its races exist on PostgreSQL only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronwheel.core.model import AttemptOutcome, Job, JobState, RetryPolicy, RunState, new_id
from cronwheel.core.planning import JobPlan, plan_job
from cronwheel.store.base import Completion, Store
from tests.store.factories import at, make_job, make_run, succeeded

WIDTH = 60.0  # seconds per partition: T0 (2030-01-01 12:00) starts one


def _is_postgres(store: Store) -> bool:
    return store.__class__.__name__ == "PostgresStore"


@pytest.fixture
async def pg_store2(pg_store: Any, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A second PostgreSQL store on the same database: another maintenance process."""
    from cronwheel.store.postgres import PostgresStore

    other = await PostgresStore.connect(request.getfixturevalue("pg_dsn"))
    try:
        yield other
    finally:
        await other.close()


async def _sql(store: Any, query: str, *args: Any) -> list[Any]:
    async with store._connection() as conn:
        return list(await conn.fetch(query, *args))


async def _count(store: Any, table: str) -> int:
    [row] = await _sql(store, f"SELECT count(*) FROM {table}")
    return int(row[0])


async def _finish(
    store: Store,
    job: Job,
    runs: list[tuple[float, RunState]],
    *,
    tries: int = 1,
) -> list[int]:
    """A run of ``job`` per (second, end state), scheduled at that second minus 30,
    claimed and finished at that second after ``tries`` attempts (failures before the
    last); their ids in order."""
    ids = []
    for t, state in runs:
        await store.materialize_runs([make_run(job, at(t - 30))], [])
        for n in range(tries):
            last = n == tries - 1
            when = at(t - (tries - 1 - n) * 0.001)
            [c] = await store.claim_runs(
                "w", [job.pool], limit=1, now=when, prefetch_until=when, lease_seconds=60
            )
            end = state if last else RunState.PENDING
            outcome = (
                AttemptOutcome.SUCCEEDED if end is RunState.SUCCEEDED else (AttemptOutcome.FAILED)
            )
            await store.complete_runs(
                [
                    Completion(
                        run_id=c.run.id,
                        fence=c.run.fence,
                        worker_id="w",
                        state=end,
                        outcome=outcome,
                        started_at=when,
                        finished_at=when,
                        lag_seconds=0.25,
                        error_class=None if outcome is AttemptOutcome.SUCCEEDED else "BoomError",
                        error_message=None if outcome is AttemptOutcome.SUCCEEDED else f"boom {n}",
                        available_at=when if end is RunState.PENDING else None,
                        reason="attempts exhausted" if end is RunState.DEAD else None,
                    )
                ]
            )
        ids.append(c.run.id)
    return ids


async def _archive(store: Store, now: datetime, **kw: Any) -> int:
    kw.setdefault("partition_seconds", WIDTH)
    return await store.archive_runs(now=now, **kw)


async def _history(store: Store) -> Any:
    """Every read a caller has of finished runs, as plain values."""
    tenant = "default"
    jobs = [j.id for j in await store.list_jobs(tenant, limit=100)]
    runs = await store.list_runs(tenant, limit=500)
    pages = []
    cursor = None
    while True:  # paged by two: the cursor crosses from one table to the other
        page = await store.list_runs(tenant, before_id=cursor, limit=2)
        if not page:
            break
        pages.append([r.id for r in page])
        cursor = page[-1].id
    by_job = {}
    for job_id in jobs:
        job_pages, cursor = [], None
        while True:
            page = await store.list_runs(tenant, job_id=job_id, before_id=cursor, limit=2)
            if not page:
                break
            job_pages.append([r.id for r in page])
            cursor = page[-1].id
        by_job[job_id] = job_pages
    return {
        "runs": runs,
        "pages": pages,
        "by_job": by_job,
        "by_state": {s: await store.list_runs(tenant, state=s) for s in RunState},
        "get": [await store.get_run(tenant, r.id) for r in runs],
        "attempts": [await store.list_attempts(tenant, r.id) for r in runs],
        "dead": await store.list_dead(tenant),
        "dead_paged": await store.list_dead(tenant, before_id=runs[0].id, limit=1),
        "last": await store.last_runs(tenant, jobs),
        "around": [await store.runs_around(tenant, j, at(-15)) for j in jobs],
        "buckets": await store.attempt_history(
            tenant, since=at(-60), now=at(120), bucket_seconds=60
        ),
        "status": [
            (p.pool, p.dead, p.finished, p.failures)
            for p in await store.pool_status(tenant, now=at(120), since=at(-60))
        ],
        "activity": (await store.list_activity(after_attempt=0, finished_since=at(-60))),
    }


async def _scenario(store: Store) -> tuple[Job, Job, list[int]]:
    """Two jobs with succeeded and dead runs (the dead after two attempts), finished at
    0..3 s, and a pending run of the first."""
    mail = make_job("mail", pool="email", retry=RetryPolicy(max_attempts=2))
    report = make_job("report", pool="reports", retry=RetryPolicy(max_attempts=2))
    await store.create_jobs([mail, report])
    ids = await _finish(store, mail, [(0, RunState.SUCCEEDED), (1, RunState.SUCCEEDED)])
    ids += await _finish(store, mail, [(2, RunState.DEAD)], tries=2)
    ids += await _finish(store, report, [(3, RunState.DEAD), (3.5, RunState.SUCCEEDED)], tries=2)
    await store.materialize_runs([make_run(mail, at(500))], [])
    return mail, report, ids


async def test_reads_are_the_same_after_the_move(store: Store) -> None:
    await _scenario(store)
    before = await _history(store)
    # Settled runs move (on PostgreSQL), a second pass finds nothing left to move.
    moved = await _archive(store, at(20))
    assert moved == (5 if _is_postgres(store) else 0)
    assert await _archive(store, at(20)) == 0
    after = await _history(store)
    assert after == before
    if _is_postgres(store):
        assert await _count(store, "run_history") == 5
        assert await _count(store, "attempt_history") == 2 + 2 + 2 + 2
        assert await _count(store, "runs") == 1  # the pending one


async def test_a_moved_dead_run_is_replayed_with_its_attempts(store: Store) -> None:
    _, _, ids = await _scenario(store)
    dead = ids[2]
    await _archive(store, at(20))
    attempts = await store.list_attempts("default", dead)
    assert len(attempts) == 2
    replayed = await store.replay_runs(
        "default", [dead, ids[0]], extra_attempts=1, now=at(30), actor="ops"
    )
    assert replayed == [dead]  # the succeeded one is not dead: not replayed
    run = await store.get_run("default", dead)
    assert run is not None and run.state is RunState.PENDING and run.max_attempts == 3
    assert await store.list_attempts("default", dead) == attempts
    [claimed] = await store.claim_runs(
        "w", ["email"], limit=1, now=at(31), prefetch_until=at(31), lease_seconds=60
    )
    assert claimed.run.id == dead and claimed.run.attempt == 3
    if _is_postgres(store):
        assert await _sql(store, "SELECT id FROM run_history WHERE id = $1", dead) == []
        assert await _sql(store, "SELECT id FROM attempt_history WHERE run_id = $1", dead) == []


async def test_cancelling_a_moved_run_returns_it_unchanged(store: Store) -> None:
    _, _, ids = await _scenario(store)
    await _archive(store, at(20))
    before = await store.get_run("default", ids[0])
    assert await store.cancel_run("default", ids[0], now=at(30), actor="ops") == before


async def test_backfill_does_not_recreate_a_moved_occurrence(store: Store) -> None:
    mail, _, _ = await _scenario(store)
    await _archive(store, at(20))
    occurrences = [at(t - 30) for t in (0, 1, 2)] + [at(-100)]
    written = await store.materialize_runs([make_run(mail, t) for t in occurrences], [])
    assert written.inserted == 1  # only the occurrence that never had a run
    mine = await store.list_runs("default", job_id=mail.id)
    assert sorted(r.scheduled_for for r in mine) == sorted([*occurrences, at(500)])


async def test_a_resume_does_not_record_a_moved_occurrence_as_skipped(store: Store) -> None:
    mail, _, _ = await _scenario(store)
    await _archive(store, at(20))
    await store.set_job_state(
        "default", mail.id, JobState.PAUSED, next_fire_at=None, now=at(21), actor="ops"
    )
    # The occurrences the pause covered, recorded skipped on resume: one already ran.
    skipped = [
        make_run(mail, t, state=RunState.SKIPPED, reason="paused") for t in (at(-30), at(10))
    ]
    await store.set_job_state(
        "default",
        mail.id,
        JobState.ACTIVE,
        next_fire_at=at(60),
        now=at(22),
        actor="ops",
        runs=skipped,
    )
    mine = await store.list_runs("default", job_id=mail.id)
    assert sorted((r.scheduled_for, r.state) for r in mine if r.scheduled_for <= at(10)) == [
        (at(-30), RunState.SUCCEEDED),
        (at(-29), RunState.SUCCEEDED),
        (at(-28), RunState.DEAD),
        (at(10), RunState.SKIPPED),
    ]


async def _plan(store: Store, now: datetime) -> list[JobPlan]:
    """What a scheduler reads and plans at ``now``: the due jobs' runs and advances."""
    horizon = timedelta(seconds=2)
    return [
        plan_job(j, now, horizon=horizon)
        for j in await store.fetch_due_jobs(now + horizon, limit=10)
    ]


async def _write(store: Store, plans: list[JobPlan]) -> Any:
    return await store.materialize_runs(
        [r for p in plans for r in p.runs], [p.advance for p in plans]
    )


async def test_a_stale_scheduler_does_not_refire_an_archived_occurrence(
    store: Store, store2: Store
) -> None:
    job = make_job(pool="p", next_fire_at=at(0))
    await store.create_jobs([job])
    # Two unsharded schedulers read the same due job; the first writes its occurrence,
    # the run finishes and is archived before the second, stalled, writes what it read.
    first, stale = await _plan(store, at(0)), await _plan(store2, at(0))
    assert [p.advance.job_id for p in stale] == [job.id]
    written = await _write(store, first)
    assert (written.inserted, written.advanced, written.stale_jobs) == (1, 1, [])
    [c] = await store.claim_runs(
        "w", ["p"], limit=1, now=at(1), prefetch_until=at(1), lease_seconds=60
    )
    await store.complete_runs([succeeded(c, at(1), lag_seconds=1.0)])
    await _archive(store, at(20), settle_seconds=0)
    if _is_postgres(store):  # the unique index on runs no longer sees the occurrence
        assert await _count(store, "runs") == 0
        assert await _count(store, "run_history") == 1
    written = await _write(store2, stale)
    assert (written.inserted, written.advanced, written.stale_jobs) == (0, 0, [job.id])
    mine = await store.list_runs("default", job_id=job.id)
    assert [(r.scheduled_for, r.state) for r in mine] == [(at(0), RunState.SUCCEEDED)]
    stored = await store.get_job("default", job.id)
    assert stored is not None and stored.next_fire_at == at(60)


async def test_a_stale_read_does_not_hold_back_the_next_fire(store: Store, store2: Store) -> None:
    job = make_job(pool="p", next_fire_at=at(0))
    await store.create_jobs([job])
    stale = await _plan(store2, at(0))
    await _write(store, await _plan(store, at(0)))
    assert (await _write(store2, stale)).stale_jobs == [job.id]
    # The stalled scheduler reads again and goes on from where the other left the job.
    assert await _plan(store2, at(0)) == []
    written = await _write(store2, await _plan(store2, at(60)))
    assert (written.inserted, written.advanced, written.stale_jobs) == (1, 1, [])
    mine = await store.list_runs("default", job_id=job.id)
    assert sorted(r.scheduled_for for r in mine) == [at(0), at(60)]
    stored = await store.get_job("default", job.id)
    assert stored is not None and stored.next_fire_at == at(120)


# -- PostgreSQL: the move, its partitions, retention, races ------------------------------

pg = pytest.mark.postgres


async def _partitions(store: Any) -> list[str]:
    found = await _sql(
        store,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = $1::regclass ORDER BY 1",
        "run_history",
    )
    return [r[0] for r in found]


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
