"""Per-pool rate limits with real workers on real time (decision 0033): two workers
serving a pool limited to 5 starts a second, together, never start more than a second's
worth in any second, and every run still runs."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from cronwheel.actions import RunContext
from cronwheel.control.service import JobService
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store.base import Store
from tests.engine.helpers import eventually, running

CONFIG = WorkerConfig(
    pools={"crm": 10},
    lease_seconds=30.0,
    heartbeat_seconds=0.5,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
)


async def test_two_workers_share_a_pools_rate(store: Store) -> None:
    jobs = JobService(store)
    job = await jobs.create(
        name="crm-sync",
        schedule={"kind": "manual"},
        action={"type": "handler", "name": "call_crm"},
        pool="crm",
    )
    await store.set_pool_rate("crm", 5.0, now=datetime.now(UTC))
    starts: list[float] = []
    workers = [Worker(store, CONFIG), Worker(store, CONFIG)]
    for worker in workers:

        @worker.handler("call_crm", pool="crm")
        def call_crm(ctx: RunContext) -> None:
            starts.append(time.monotonic())

    await jobs.enqueue(job.id, [None] * 20)
    async with running(workers[0]), running(workers[1]):

        async def all_started() -> bool:
            return len(starts) == 20

        await eventually(all_started, timeout=60)
    starts.sort()
    # A full bucket (5), then 5 a second: 20 starts take three seconds at least, and no
    # one-second window holds more than a second's worth on top of the bucket.
    assert starts[-1] - starts[0] >= 2.5, starts
    for i, first in enumerate(starts):
        within = sum(1 for t in starts[i:] if t - first < 1.0)
        assert within <= 10, (within, starts)
