"""History that grows forever, bounded (issue 18 item 4, decision 0032): finished runs
archived out of the live tables into time-partitioned history, reads unchanged by the
move, retention by dropping partitions, an occurrence materialised once across both.

The reads are conformance (both stores: SQLite archives nothing, so its answers must be
the same too); the move itself, its partitions and its races exist on PostgreSQL only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from cronwheel.core.model import AttemptOutcome, Job, JobState, RetryPolicy, RunState
from cronwheel.core.planning import JobPlan, plan_job
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run, succeeded

WIDTH = 60.0  # seconds per partition: T0 (2030-01-01 12:00) starts one


def _is_postgres(store: Store) -> bool:
    return store.__class__.__name__ == "PostgresStore"


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


class RunArchiveContract:
    """History that grows forever, bounded (issue 18 item 4, decision 0032): finished
    runs.

    Part of the ``housekeeping`` seam's contract: subclass it with a ``store`` fixture
    to run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_reads_are_the_same_after_the_move(self, store: Store) -> None:
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

    async def test_a_moved_dead_run_is_replayed_with_its_attempts(self, store: Store) -> None:
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

    async def test_cancelling_a_moved_run_returns_it_unchanged(self, store: Store) -> None:
        _, _, ids = await _scenario(store)
        await _archive(store, at(20))
        before = await store.get_run("default", ids[0])
        assert await store.cancel_run("default", ids[0], now=at(30), actor="ops") == before

    async def test_backfill_does_not_recreate_a_moved_occurrence(self, store: Store) -> None:
        mail, _, _ = await _scenario(store)
        await _archive(store, at(20))
        occurrences = [at(t - 30) for t in (0, 1, 2)] + [at(-100)]
        written = await store.materialize_runs([make_run(mail, t) for t in occurrences], [])
        assert written.inserted == 1  # only the occurrence that never had a run
        mine = await store.list_runs("default", job_id=mail.id)
        assert sorted(r.scheduled_for for r in mine) == sorted([*occurrences, at(500)])

    async def test_a_resume_does_not_record_a_moved_occurrence_as_skipped(
        self, store: Store
    ) -> None:
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

    async def test_a_stale_scheduler_does_not_refire_an_archived_occurrence(
        self, store: Store, store2: Store
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

    async def test_a_stale_read_does_not_hold_back_the_next_fire(
        self, store: Store, store2: Store
    ) -> None:
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
