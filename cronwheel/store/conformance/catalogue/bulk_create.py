"""Conformance: large batches of new jobs, written a few statements at a time, read back
job by job as they were given, all or nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from cronwheel.core.model import Job, JobState, Overlap, Priority, RetryPolicy, RunState
from cronwheel.errors import Conflict, NotFound
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run

N = 2345  # several statements' worth on either store, and not a round number of them


def mixed_batch(prefix: str) -> list[Job]:
    """Jobs that share objects in a few combinations, interleaved, plus some of their own."""
    base = make_job(payload=None)
    variants = [
        base,
        replace(base, schedule={"kind": "interval", "every_seconds": 60}, next_fire_at=at(30)),
        replace(base, priority=Priority.HIGH, retry=RetryPolicy(max_attempts=7)),
        replace(base, overlap=Overlap.QUEUE, jitter_seconds=1.5, pool="other"),
        replace(
            base,
            schedule={"kind": "immediate"},
            state=JobState.COMPLETED,
            next_fire_at=None,
            last_fire_at=T0,
        ),
    ]
    shared_payload = {"shared": True}
    jobs = []
    for i in range(N):
        job = variants[i * 7 % len(variants)]
        payload: Any = {"i": i, "s": 'é"\\\n'} if i % 3 == 0 else shared_payload
        if i % 10 == 0:
            payload = None
        if i % 17 == 0:  # a template of its own, equal in value to another
            job = replace(job, action={"type": "handler", "name": "noop"}, timeout_seconds=299.5)
        jobs.append(replace(job, id=make_job().id, name=f"{prefix}-{i:05d}", payload=payload))
    return jobs


class BulkCreateContract:
    """Large batches of new jobs, written a few statements at a time, read back.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_large_mixed_batch_reads_back_job_by_job(self, store: Store) -> None:
        jobs = mixed_batch("bulk")
        runs = [make_run(j, T0) for j in jobs if j.schedule["kind"] == "immediate"]
        await store.create_jobs(jobs, runs, actor="bulk-test")
        listed = await store.list_jobs(jobs[0].tenant_id, limit=N + 1)
        assert sorted(listed, key=lambda j: j.id) == sorted(jobs, key=lambda j: j.id)
        for job in (jobs[0], jobs[1], jobs[17], jobs[999], jobs[1000], jobs[-1]):
            [entry] = await store.list_audit(job.tenant_id, job.id)
            assert (entry.action, entry.actor, entry.at) == ("created", "bulk-test", job.created_at)
            assert entry.details == {"version": 1, "name": job.name}
        stored_runs = await store.list_runs(jobs[0].tenant_id, limit=N + 1)
        assert sorted(r.job_id for r in stored_runs) == sorted(r.job_id for r in runs)

    @pytest.mark.parametrize("where", [0, 1500, N - 1])
    async def test_a_conflict_anywhere_in_a_large_batch_writes_nothing(
        self, store: Store, where: int
    ) -> None:
        taken = make_job("taken")
        await store.create_jobs([taken])
        jobs = mixed_batch("doomed")
        jobs[where] = replace(jobs[where], name="taken")
        runs = [make_run(j, T0) for j in jobs if j.schedule["kind"] == "immediate"]
        with pytest.raises(Conflict) as err:
            await store.create_jobs(jobs, runs)
        assert (err.value.field, err.value.reason) == (
            "name",
            "a live job named 'taken' already exists for this tenant",
        )
        assert await store.list_jobs(taken.tenant_id) == [taken]
        assert await store.list_runs(taken.tenant_id) == []
        assert await store.list_audit(taken.tenant_id, jobs[0].id) == []

    async def test_runs_of_a_large_batch_keep_every_column_of_their_own(self, store: Store) -> None:
        jobs = mixed_batch("varied")
        runs = [
            make_run(
                j,
                at(i % 3),
                available_at=at(i % 3 + i % 2),
                pool=f"pool-{i % 4}",
                priority=Priority(i % 4),
                max_attempts=1 + i % 5,
                job_version=1 + i % 2,
                state=RunState.SKIPPED if i % 7 == 0 else RunState.PENDING,
                reason=None if i % 6 else f"reason {i % 12}",
                overlap=Overlap.QUEUE if i % 9 == 0 else Overlap.ALLOW,
            )
            for i, j in enumerate(jobs)
        ]
        await store.create_jobs(jobs, runs)
        stored = {r.job_id: r for r in await store.list_runs(jobs[0].tenant_id, limit=N + 1)}
        fields: tuple[str, ...] = (
            "scheduled_for",
            "available_at",
            "pool",
            "priority",
            "max_attempts",
        )
        fields += ("job_version", "state", "reason", "overlap", "tenant_id")
        assert len(stored) == len(runs)
        for run in runs:
            got = stored[run.job_id]
            assert [getattr(got, f) for f in fields] == [getattr(run, f) for f in fields]

    @pytest.mark.parametrize("where", [0, 1500, N - 1])
    async def test_an_unknown_tenant_anywhere_in_a_large_batch_writes_nothing(
        self, store: Store, where: int
    ) -> None:
        jobs = mixed_batch("orphan")
        jobs[where] = replace(jobs[where], tenant_id="nobody")
        runs = [make_run(j, T0) for j in jobs if j.schedule["kind"] == "immediate"]
        with pytest.raises(NotFound) as err:
            await store.create_jobs(jobs, runs)
        assert (err.value.what, err.value.ident) == ("tenant", "nobody")
        assert await store.list_jobs(jobs[0].tenant_id) == []
        assert await store.list_runs(jobs[0].tenant_id) == []

    @pytest.mark.parametrize("where", [0, 1500, N - 1])
    async def test_a_run_of_an_unknown_job_in_a_large_batch_writes_nothing(
        self, store: Store, where: int
    ) -> None:
        jobs = mixed_batch("ghostly")
        runs = [make_run(j, T0) for j in jobs]
        ghost = make_job("ghost")
        runs[where] = make_run(ghost, T0)
        with pytest.raises(NotFound) as err:
            await store.create_jobs(jobs, runs)
        assert (err.value.what, err.value.ident) == ("job", ghost.id)
        assert await store.list_jobs(jobs[0].tenant_id) == []
        assert await store.list_runs(jobs[0].tenant_id) == []

    async def test_runs_may_belong_to_jobs_created_before(self, store: Store) -> None:
        earlier = make_job("earlier")
        await store.create_jobs([earlier])
        jobs = mixed_batch("later")
        runs = [make_run(earlier, T0), *(make_run(j, T0) for j in reversed(jobs))]
        await store.create_jobs(jobs, runs)
        stored = await store.list_runs(earlier.tenant_id, limit=N + 2)
        assert sorted(r.job_id for r in stored) == sorted(r.job_id for r in runs)
