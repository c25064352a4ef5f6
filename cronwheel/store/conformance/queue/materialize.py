"""Conformance: the scheduler's verbs — due jobs and insert-if-absent runs (I2)."""

from __future__ import annotations

import asyncio

from cronwheel.core.model import JobState, RunState, shard_key
from cronwheel.store.base import JobAdvance, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


class MaterializeContract:
    """The scheduler's verbs — due jobs and insert-if-absent runs (I2).

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_due_jobs_are_active_due_and_earliest_first(self, store: Store) -> None:
        late, early, future = (
            make_job(next_fire_at=at(30)),
            make_job(next_fire_at=at(10)),
            make_job(next_fire_at=at(90)),
        )
        paused = make_job(next_fire_at=at(5), state=JobState.PAUSED)
        never = make_job(next_fire_at=None)
        await store.create_jobs([late, early, future, paused, never])
        due = await store.fetch_due_jobs(at(60), limit=10)
        assert [j.id for j in due] == [early.id, late.id]
        assert [j.id for j in await store.fetch_due_jobs(at(60), limit=1)] == [early.id]
        assert [j.id for j in await store.fetch_due_jobs(at(30), limit=10)] == [early.id, late.id]

    async def test_due_jobs_by_shard(self, store: Store) -> None:
        jobs = [make_job(next_fire_at=at(i)) for i in range(40)]
        await store.create_jobs(jobs)
        mine = await store.fetch_due_jobs(at(100), limit=100, shards=[1, 3], shard_count=4)
        assert {j.id for j in mine} == {j.id for j in jobs if shard_key(j.id) % 4 in (1, 3)}
        assert 0 < len(mine) < 40

    async def test_due_jobs_are_counted_up_to_the_limit(self, store: Store) -> None:
        jobs = [make_job(next_fire_at=at(i)) for i in range(40)]
        paused = make_job(next_fire_at=at(1), state=JobState.PAUSED)
        await store.create_jobs([*jobs, paused, make_job(next_fire_at=None)])
        assert await store.count_due_jobs(at(100), limit=1_000) == 40
        assert await store.count_due_jobs(at(9), limit=1_000) == 10
        assert await store.count_due_jobs(at(100), limit=25) == 25
        assert await store.count_due_jobs(at(-1), limit=1_000) == 0
        mine = await store.count_due_jobs(at(100), limit=1_000, shards=[1, 3], shard_count=4)
        assert mine == sum(shard_key(j.id) % 4 in (1, 3) for j in jobs)

    async def test_materialize_inserts_runs_and_advances_jobs(self, store: Store) -> None:
        job = make_job(next_fire_at=at(0))
        await store.create_jobs([job])
        runs = [
            make_run(job, at(0)),
            make_run(job, at(60), state=RunState.SKIPPED, reason="misfire"),
        ]
        result = await store.materialize_runs(
            runs, [JobAdvance(job.id, 1, at(120), at(60), expected_next_fire_at=at(0))]
        )
        assert (result.inserted, result.advanced, result.stale_jobs) == (2, 1, [])
        stored = await store.get_job(job.tenant_id, job.id)
        assert stored is not None
        assert (stored.next_fire_at, stored.last_fire_at, stored.version) == (at(120), at(60), 1)
        listed = await store.list_runs(job.tenant_id, job_id=job.id)
        assert [(r.scheduled_for, r.state, r.reason) for r in listed] == [
            (at(60), RunState.SKIPPED, "misfire"),
            (at(0), RunState.PENDING, None),
        ]
        assert listed[0].finished_at is not None and listed[1].finished_at is None

    async def test_an_existing_run_is_not_inserted_twice(self, store: Store) -> None:
        job = make_job()
        await store.create_jobs([job])
        first = await store.materialize_runs([make_run(job, at(0))], [])
        again = await store.materialize_runs([make_run(job, at(0)), make_run(job, at(1))], [])
        assert (first.inserted, again.inserted) == (1, 1)
        assert len(await store.list_runs(job.tenant_id, job_id=job.id)) == 2

    async def test_racing_schedulers_leave_one_row_per_occurrence(
        self, store: Store, store2: Store
    ) -> None:
        jobs = [make_job(next_fire_at=at(0)) for _ in range(20)]
        await store.create_jobs(jobs)
        runs = [make_run(j, at(s)) for j in jobs for s in range(10)]
        results = await asyncio.gather(
            *(s.materialize_runs(runs, []) for s in (store, store2, store, store2))
        )
        assert sum(r.inserted for r in results) == 200
        stored = await store.list_runs(jobs[0].tenant_id, limit=1000)
        assert len(stored) == 200
        assert len({(r.job_id, r.scheduled_for) for r in stored}) == 200

    async def test_a_job_changed_since_it_was_read_gets_nothing(self, store: Store) -> None:
        job = make_job(next_fire_at=at(0))
        await store.create_jobs([job])
        await store.set_job_state(
            job.tenant_id, job.id, JobState.PAUSED, next_fire_at=None, now=T0, actor="t"
        )
        await store.set_job_state(
            job.tenant_id, job.id, JobState.ACTIVE, next_fire_at=at(0), now=T0, actor="t"
        )
        result = await store.materialize_runs(
            [make_run(job, at(0))],
            [JobAdvance(job.id, 1, at(60), at(0), expected_next_fire_at=at(0))],
        )
        assert (result.inserted, result.advanced, result.stale_jobs) == (0, 0, [job.id])
        stored = await store.get_job(job.tenant_id, job.id)
        assert stored is not None and stored.next_fire_at == at(0)

    async def test_runs_of_an_inactive_job_are_dropped(self, store: Store) -> None:
        job = make_job(state=JobState.PAUSED)
        await store.create_jobs([job])
        result = await store.materialize_runs([make_run(job, at(0))], [])
        assert result.inserted == 0
        assert await store.list_runs(job.tenant_id) == []

    async def test_a_one_time_job_completes_when_advanced(self, store: Store) -> None:
        job = make_job(schedule={"kind": "once", "at": at(0).isoformat()}, next_fire_at=at(0))
        await store.create_jobs([job])
        advance = JobAdvance(
            job.id, 1, None, at(0), JobState.COMPLETED, expected_next_fire_at=at(0)
        )
        await store.materialize_runs([make_run(job, at(0))], [advance])
        stored = await store.get_job(job.tenant_id, job.id)
        assert stored is not None
        assert (stored.state, stored.next_fire_at) == (JobState.COMPLETED, None)
        assert await store.fetch_due_jobs(at(100), limit=10) == []

    async def test_due_jobs_take_turns_across_tenants(self, store: Store) -> None:
        for tenant in ("big", "small", "tiny"):
            await store.ensure_tenant(tenant, tenant, now=T0)
        big = [make_job(tenant_id="big", next_fire_at=at(i)) for i in range(10)]
        small = [make_job(tenant_id="small", next_fire_at=at(20 + i)) for i in range(2)]
        tiny = [make_job(tenant_id="tiny", next_fire_at=at(30))]
        await store.create_jobs(big + small + tiny)
        batch = await store.fetch_due_jobs(at(60), limit=5)
        # the big tenant's backlog is older, yet every tenant gets its turn in the first batch
        assert [j.id for j in batch] == [big[0].id, small[0].id, tiny[0].id, big[1].id, small[1].id]
