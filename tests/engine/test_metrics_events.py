"""Where each in-process metric is recorded: the worker per completion batch, the
scheduler per tick, a resume per skipped occurrence it recorded."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from cronwheel.actions import RunContext
from cronwheel.control.service import JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import MisfireMode, MisfirePolicy, Overlap, RunState
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.shards import ShardingConfig
from cronwheel.engine.worker import Worker
from cronwheel.observability import metrics
from cronwheel.observability.metrics import Metrics
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, make_job, make_run
from tests.engine.helpers import eventually, job_with_run, running
from tests.engine.test_worker import FAST

EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "UTC"}
HANDLER = {"type": "handler", "name": "noop"}


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_the_worker_records_each_written_attempt_with_its_lag(store: Store) -> None:
    m = Metrics()
    worker = Worker(store, FAST, metrics=m)

    @worker.handler("noop")
    def noop(ctx: RunContext) -> None:
        pass

    @worker.handler("boom")
    def boom(ctx: RunContext) -> None:
        raise RuntimeError("boom")

    await job_with_run(store)
    await job_with_run(store, action={"type": "handler", "name": "boom"})
    assert await worker.run_once() == 2
    r = m.registry
    assert sample(r, "cronwheel_attempts_total", pool="default", outcome="succeeded") == 1
    assert sample(r, "cronwheel_attempts_total", pool="default", outcome="failed") == 1
    assert sample(r, "cronwheel_run_start_lag_seconds_count", pool="default") == 2
    assert sample(r, "cronwheel_run_duration_seconds_count", pool="default", outcome="failed") == 1


async def test_a_workers_claim_counts_the_runs_it_skipped_for_overlap(store: Store) -> None:
    job = make_job(overlap=Overlap.SKIP)
    occurrences = [make_run(job, at(t), overlap=Overlap.SKIP) for t in (0, 10, 20)]
    await store.create_jobs([job], occurrences)
    [busy] = await store.claim_runs(
        "other", ["default"], limit=1, now=at(0), prefetch_until=at(0), lease_seconds=600
    )
    m = Metrics()
    worker = Worker(store, FAST, clock=FrozenClock(at(20)), metrics=m)
    assert await worker.claim() == 0  # the job still runs: both later runs are skipped
    assert sample(m.registry, "cronwheel_runs_skipped_total", reason="overlap") == 2
    runs = await store.list_runs(job.tenant_id, job_id=job.id)
    assert sorted(r.state.value for r in runs if r.id != busy.run.id) == ["skipped", "skipped"]


async def test_a_tick_records_its_duration_lead_shards_and_misfire_skips(store: Store) -> None:
    m = Metrics()
    clock = FrozenClock(at(0))
    skip = MisfirePolicy(MisfireMode.SKIP)
    job = make_job(next_fire_at=at(-600), misfire=skip, schedule=EVERY_MINUTE)
    await store.create_jobs([job])
    scheduler = Scheduler(store, clock=clock, metrics=m)
    await scheduler._tick()
    r = m.registry
    assert sample(r, "cronwheel_scheduler_tick_seconds_count") == 1
    assert sample(r, "cronwheel_scheduler_lead_seconds") == pytest.approx(2.0, abs=0.01)
    assert (
        sample(r, "cronwheel_scheduler_shards_owned"),
        sample(r, "cronwheel_scheduler_shards"),
    ) == (1, 1)
    runs = await store.list_runs("default", job_id=job.id, limit=100)
    skipped = sum(run.state is RunState.SKIPPED for run in runs)
    assert skipped >= 9  # ten minutes missed, the policy skips them
    assert sample(r, "cronwheel_runs_skipped_total", reason="misfire") == skipped


async def test_only_a_scheduler_exports_the_scheduler_metrics(store: Store) -> None:
    """An API's or a worker's 0 of 0 shards would hide a cluster with no scheduler at all
    from CronwheelShardsWithoutScheduler (issue 29): the families exist only once a
    scheduler is built, and then say how many shards there are."""
    m = Metrics()
    names = {"cronwheel_scheduler_shards_owned", "cronwheel_scheduler_shards"}
    names |= {"cronwheel_scheduler_lead_seconds", "cronwheel_scheduler_tick_seconds"}
    Worker(store, FAST, metrics=m)
    assert names.isdisjoint(family.name for family in m.registry.collect())
    Scheduler(store, sharding=ShardingConfig(16), metrics=m)
    assert names <= {family.name for family in m.registry.collect()}
    r = m.registry
    assert sample(r, "cronwheel_scheduler_shards") == 16
    assert r.get_sample_value("cronwheel_scheduler_shards_owned") == 0  # until a tick


async def test_a_resume_counts_the_skips_it_recorded_not_the_occurrences(store: Store) -> None:
    clock = FrozenClock(at(1))
    service = JobService(store, clock=clock, actor="tester")
    job = await service.create(name="p", schedule=EVERY_MINUTE, action=HANDLER)
    # A tick that raced the pause had planned the first occurrence, but the job's next
    # fire time did not move: it keeps its run, and the resume records no second one.
    await store.materialize_runs([make_run(job, at(60))], [])
    await service.pause(job.id)
    clock.set(at(200))
    before = sample(metrics.default().registry, "cronwheel_runs_skipped_total", reason="paused")
    await service.resume(job.id)
    runs = await service.runs(job.id)
    assert [(r.scheduled_for, r.state) for r in runs] == [
        (at(180), RunState.SKIPPED),
        (at(120), RunState.SKIPPED),
        (at(60), RunState.PENDING),
    ]
    after = sample(metrics.default().registry, "cronwheel_runs_skipped_total", reason="paused")
    assert after - before == 2


@pytest.mark.parametrize("status", [200, 503])
def test_status_classes_are_bounded(status: int) -> None:
    assert metrics.status_class(status) in metrics.WEBHOOK_CLASSES


async def test_a_run_released_after_it_started_counts_one_cancelled_attempt(
    store: Store,
) -> None:
    m = Metrics()
    worker = Worker(store, replace(FAST, prefetch_seconds=60), metrics=m)
    started = threading.Event()

    @worker.handler("noop")
    async def forever(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(60)

    await job_with_run(store)
    await job_with_run(store, due_in=30)  # claimed, then released before its start
    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        await eventually(lambda: _true(worker.in_flight == 2))
    r = m.registry
    assert sample(r, "cronwheel_attempts_total", pool="default", outcome="cancelled") == 1
    assert sample(r, "cronwheel_attempts_total", pool="default", outcome="succeeded") == 0


async def _true(value: bool) -> bool:
    return value
