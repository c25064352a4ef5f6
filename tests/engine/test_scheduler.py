"""The scheduler against each store, with a frozen clock: I1 no miss, I2 no double, I5."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from cronwheel.core.clock import FrozenClock
from cronwheel.core.lead import DEFAULT_SECONDS_PER_JOB, Pace
from cronwheel.core.model import JobState, RunState
from cronwheel.core.planning import plan_job
from cronwheel.engine.scheduler import Scheduler, SchedulerConfig
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at, make_job

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
        results = await asyncio.gather(*(s.run_once() for s in schedulers))
        # Each job advanced once a round: a scheduler that read it before another
        # advanced it is refused (compare-and-set on next_fire_at) and writes nothing.
        assert sum(r.jobs for r in results) == len(jobs)
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


async def test_a_stopping_scheduler_writes_no_batch_more(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A herd's tick is many batches: once told to stop (SIGTERM), the scheduler ends it
    after the batch in progress, instead of holding the stop up for the whole herd."""
    jobs = [make_job(schedule=EVERY_SECOND, next_fire_at=at(1)) for _ in range(25)]
    await store.create_jobs(jobs)
    stop = asyncio.Event()
    write = store.materialize_runs

    async def write_then_stop(*args: Any, **kwargs: Any) -> Any:
        stop.set()  # the signal arrives while the first batch is being written
        return await write(*args, **kwargs)

    monkeypatch.setattr(store, "materialize_runs", write_then_stop)
    result = await Scheduler(store, clock=FrozenClock(at(1)), config=CONFIG).run_once(stop)
    assert result.jobs == CONFIG.batch_size  # the first batch, whole; no other


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


def _once(seconds: float) -> dict[str, str]:
    return {"kind": "once", "at": at(seconds).isoformat()}


async def test_a_herd_is_materialised_as_early_as_its_size_and_the_pace_need(
    store: Store,
) -> None:
    herd = [make_job(schedule=_once(10), next_fire_at=at(10)) for _ in range(20)]
    await store.create_jobs(herd)
    clock = FrozenClock(T0)
    scheduler = Scheduler(store, clock=clock, config=CONFIG)
    # At 1,000 jobs/s, 20 jobs take 20 ms: the horizon (1 s) is lead enough.
    scheduler.pace = Pace(seconds_per_job=0.001)
    result = await scheduler.run_once()
    assert (result.runs_inserted, result.lead_seconds) == (0, pytest.approx(1.04))
    # At 5 jobs/s they take 4 s: the scheduler looks 1 + 2 * 4 = 9 s ahead.
    scheduler.pace = Pace(seconds_per_job=0.2)
    clock.set(at(0.5))
    result = await scheduler.run_once()
    assert (result.runs_inserted, result.lead_seconds) == (0, pytest.approx(9.0))
    clock.set(at(1))
    result = await scheduler.run_once()
    assert (result.runs_inserted, result.jobs_completed) == (20, 20)  # batches of 7
    for job in herd:
        [run] = await store.list_runs("default", job_id=job.id)
        assert (run.state, run.scheduled_for, run.available_at) == (
            RunState.PENDING,
            at(10),
            at(10),
        )


async def test_no_herd_is_materialised_further_ahead_than_max_lead(store: Store) -> None:
    herd = [make_job(schedule=_once(40), next_fire_at=at(40)) for _ in range(20)]
    await store.create_jobs(herd)
    clock = FrozenClock(T0)
    config = SchedulerConfig(horizon_seconds=1.0, batch_size=7, max_lead_seconds=30.0)
    scheduler = Scheduler(store, clock=clock, config=config)
    scheduler.pace = Pace(seconds_per_job=1.0)  # 20 jobs would want 41 s
    # Further than max_lead away, the herd is not even counted.
    for now in (0, 9.9):
        clock.set(at(now))
        result = await scheduler.run_once()
        assert (result.runs_inserted, result.lead_seconds) == (0, 1.0)
    clock.set(at(10))
    result = await scheduler.run_once()
    assert (result.runs_inserted, result.lead_seconds) == (20, 30.0)


async def test_a_job_taken_early_gets_its_next_occurrence_only(store: Store) -> None:
    herd = [make_job(schedule=_once(10), next_fire_at=at(10)) for _ in range(20)]
    ticking = make_job(schedule=EVERY_SECOND, next_fire_at=at(5))
    await store.create_jobs([*herd, ticking])
    config = SchedulerConfig(horizon_seconds=1.0, batch_size=1000)
    scheduler = Scheduler(store, clock=FrozenClock(at(1)), config=config)
    scheduler.pace = Pace(seconds_per_job=0.2)
    result = await scheduler.run_once()
    assert result.lead_seconds == pytest.approx(1 + 2 * 21 * 0.2)
    # Not every second up to the lead (5 to 10): the lead is for herds, not for
    # computing a schedule ahead (I6).
    assert await _scheduled(store, ticking.id) == [5.0]
    stored = await store.get_job("default", ticking.id)
    assert stored is not None and stored.next_fire_at == at(6)


async def test_racing_schedulers_with_a_stretched_lead_materialise_each_occurrence_once(
    store: Store, store2: Store
) -> None:
    herd = [make_job(schedule=_once(12), next_fire_at=at(12)) for _ in range(30)]
    ticking = [make_job(schedule=EVERY_SECOND, next_fire_at=at(1)) for _ in range(5)]
    await store.create_jobs([*herd, *ticking])
    clock = FrozenClock(T0)
    schedulers = [Scheduler(s, clock=clock, config=CONFIG) for s in (store, store2, store)]
    for scheduler, seconds_per_job in zip(schedulers, (0.2, 0.1, 0.0), strict=True):
        scheduler.pace = Pace(seconds_per_job=max(seconds_per_job, 1e-6))  # leads 15, 8, 1 s
    await asyncio.gather(*(s.run_once() for s in schedulers))
    # The 15 s lead took the herd at once, 12 s ahead.
    for job in herd:
        assert await _scheduled(store, job.id) == [12.0]
    for _ in range(15):
        clock.advance(1)
        await asyncio.gather(*(s.run_once() for s in schedulers))
    for job in herd:
        assert await _scheduled(store, job.id) == [12.0]
    for job in ticking:
        # Every second once, none missing, as far as the last tick's horizon at least and
        # never further than its longest lead.
        scheduled = await _scheduled(store, job.id)
        assert scheduled == [float(s) for s in range(1, len(scheduled) + 1)]
        assert 16 <= len(scheduled) <= 15 + 15


class _MovingClock(FrozenClock):
    """Half a second passes at every reading, as if each step of a tick took that long."""

    def now(self) -> datetime:
        return self.advance(0.5)


async def test_the_scheduler_measures_its_pace_on_large_batches(store: Store) -> None:
    await store.create_jobs([make_job(schedule=_once(0), next_fire_at=at(0)) for _ in range(5)])
    scheduler = Scheduler(store, clock=_MovingClock(T0), config=SchedulerConfig(batch_size=1000))
    await scheduler.run_once()
    assert scheduler.pace.seconds_per_job == DEFAULT_SECONDS_PER_JOB  # 5 jobs tell nothing
    await store.create_jobs([make_job(schedule=_once(3), next_fire_at=at(3)) for _ in range(200)])
    assert (await scheduler.run_once()).runs_inserted == 200
    # A batch read at one instant and written half a second later: 2.5 ms a job.
    assert scheduler.pace.seconds_per_job == pytest.approx(
        DEFAULT_SECONDS_PER_JOB + 0.3 * (0.0025 - DEFAULT_SECONDS_PER_JOB)
    )
