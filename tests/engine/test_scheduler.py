"""The scheduler against each store, with a frozen clock: I1 no miss, I2 no double, I5."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cronwheel.clock import FrozenClock
from cronwheel.model import JobState, RunState
from cronwheel.planning import plan_job
from cronwheel.scheduler import Scheduler, SchedulerConfig
from cronwheel.store.base import Store
from tests.store.factories import T0, at, make_job

EVERY_SECOND = {"kind": "cron", "cron": "* * * * * *", "timezone": "Europe/Paris"}
CONFIG = SchedulerConfig(horizon_seconds=1.0, batch_size=7)


async def _scheduled(store: Store, job_id: str) -> list[float]:
    runs = await store.list_runs("default", job_id=job_id, limit=10_000)
    return sorted((r.scheduled_for - T0).total_seconds() for r in runs)


async def test_every_occurrence_once_across_ticks(store: Store) -> None:
    clock = FrozenClock(T0)
    job = make_job(schedule=EVERY_SECOND, next_fire_at=at(1))
    await store.create_jobs([job])
    scheduler = Scheduler(store, clock=clock, config=CONFIG)
    for _ in range(30):
        await scheduler.run_once()
        await scheduler.run_once()  # a repeated tick adds nothing
        clock.advance(0.7)
    assert await _scheduled(store, job.id) == [float(s) for s in range(1, 22)]


async def test_many_jobs_are_processed_in_batches(store: Store) -> None:
    jobs = [make_job(schedule=EVERY_SECOND, next_fire_at=at(1)) for _ in range(25)]
    await store.create_jobs(jobs)
    result = await Scheduler(store, clock=FrozenClock(at(1)), config=CONFIG).run_once()
    assert (result.jobs, result.runs_inserted) == (25, 50)  # occurrences at 1 s and 2 s
    for j in jobs:
        assert await _scheduled(store, j.id) == [1.0, 2.0]


async def test_racing_schedulers_materialise_each_occurrence_once(
    store: Store, store2: Store
) -> None:
    jobs = [make_job(schedule=EVERY_SECOND, next_fire_at=at(1)) for _ in range(10)]
    await store.create_jobs(jobs)
    clock = FrozenClock(T0)
    schedulers = [Scheduler(s, clock=clock, config=CONFIG) for s in (store, store2, store, store2)]
    for _ in range(10):
        await asyncio.gather(*(s.run_once() for s in schedulers))
        clock.advance(1)
    for j in jobs:
        assert await _scheduled(store, j.id) == [float(s) for s in range(1, 11)]


async def test_paused_and_cancelled_jobs_produce_nothing(store: Store) -> None:
    paused = make_job(schedule=EVERY_SECOND, next_fire_at=at(1))
    cancelled = make_job(schedule=EVERY_SECOND, next_fire_at=at(1))
    await store.create_jobs([paused, cancelled])
    await store.set_job_state(
        "default", paused.id, JobState.PAUSED, next_fire_at=at(1), now=T0, actor="t"
    )
    await store.set_job_state(
        "default", cancelled.id, JobState.CANCELLED, next_fire_at=None, now=T0, actor="t"
    )
    clock = FrozenClock(T0)
    scheduler = Scheduler(store, clock=clock, config=CONFIG)
    for _ in range(5):
        clock.advance(1)
        assert (await scheduler.run_once()).runs_inserted == 0
    assert await store.list_runs("default") == []


async def test_a_one_time_job_fires_once_and_completes(store: Store) -> None:
    job = make_job(schedule={"kind": "once", "at": at(3).isoformat()}, next_fire_at=at(3))
    await store.create_jobs([job])
    clock = FrozenClock(at(2.5))
    result = await Scheduler(store, clock=clock, config=CONFIG).run_once()
    assert (result.runs_inserted, result.jobs_completed) == (1, 1)
    stored = await store.get_job("default", job.id)
    assert stored is not None and stored.state is JobState.COMPLETED
    [run] = await store.list_runs("default", job_id=job.id)
    assert (run.state, run.scheduled_for) == (RunState.PENDING, at(3))


async def test_a_job_changed_mid_tick_is_left_for_the_next_tick(store: Store) -> None:
    job = make_job(schedule=EVERY_SECOND, next_fire_at=at(1))
    await store.create_jobs([job])
    due = await store.fetch_due_jobs(at(2), limit=10)
    await store.set_job_state(
        "default", job.id, JobState.PAUSED, next_fire_at=at(1), now=T0, actor="t"
    )
    plan = plan_job(due[0], at(1), horizon=timedelta(seconds=1))
    written = await store.materialize_runs(plan.runs, [plan.advance])
    assert (written.inserted, written.stale_jobs) == (0, [job.id])
