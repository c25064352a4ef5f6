"""Sharded schedulers on each store: an even split, takeover, and no double fire."""

from __future__ import annotations

import asyncio
import itertools

from cronwheel.engine.scheduler import Scheduler, SchedulerConfig
from cronwheel.engine.shards import ShardingConfig
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_job
from tests.engine.helpers import eventually

FAST = ShardingConfig(shard_count=16, lease_seconds=0.9, renew_seconds=0.3)


async def _owned(*schedulers: Scheduler) -> list[set[int]]:
    return [set(s.owner.guard.epochs) if s.owner else set() for s in schedulers]


async def test_two_schedulers_split_the_shards_evenly(store: Store, store2: Store) -> None:
    a = Scheduler(store, sharding=FAST, holder="a")
    b = Scheduler(store2, sharding=FAST, holder="b")
    assert a.owner is not None and b.owner is not None
    await a.owner.rebalance()  # alone: takes everything
    assert len(a.owner.guard.epochs) == 16
    for _ in range(3):  # b announces itself, a gives back the excess, b takes it
        await b.owner.rebalance()
        await a.owner.rebalance()
    await b.owner.rebalance()
    owned_a, owned_b = await _owned(a, b)
    assert (len(owned_a), len(owned_b)) == (8, 8)
    assert owned_a.isdisjoint(owned_b)
    await b.owner.stop()  # a clean stop hands the shards back at once
    await a.owner.rebalance()
    assert len(a.owner.guard.epochs) == 16


async def test_a_dead_schedulers_shards_are_taken_over_after_their_lease(
    store: Store, store2: Store
) -> None:
    a = Scheduler(store, sharding=FAST, holder="a")
    b = Scheduler(store2, sharding=FAST, holder="b")
    assert a.owner is not None and b.owner is not None
    await a.owner.rebalance()
    await b.owner.rebalance()
    await a.owner.rebalance()
    await b.owner.rebalance()
    loop = asyncio.get_running_loop()
    died = loop.time()  # a stops renewing, without releasing: a crash

    async def b_has_all() -> bool:
        await b.owner.rebalance()  # type: ignore[union-attr]
        return len(b.owner.guard.epochs) == 16  # type: ignore[union-attr]

    await eventually(b_has_all, timeout=30)
    assert loop.time() - died <= 2 * FAST.lease_seconds + FAST.renew_seconds


async def test_sharded_schedulers_materialise_each_occurrence_once(
    store: Store, store2: Store
) -> None:
    now = await store.now()
    every_second = {"kind": "interval", "every_seconds": 1, "anchor": now.isoformat()}
    jobs = [make_job(schedule=every_second, next_fire_at=now) for _ in range(30)]
    await store.create_jobs(jobs)
    config = SchedulerConfig(horizon_seconds=1.0, interval_seconds=0.1)
    schedulers = [
        Scheduler(s, config=config, sharding=FAST, holder=h)
        for s, h in ((store, "a"), (store2, "b"))
    ]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(s.run(stop)) for s in schedulers]
    await asyncio.sleep(3)  # observe three seconds of real ticking, then check all of it
    stop.set()
    await asyncio.gather(*tasks)
    runs = await store.list_runs("default", limit=10_000)
    keys = [(r.job_id, r.scheduled_for) for r in runs]
    assert len(keys) == len(set(keys))  # each occurrence once
    for job in jobs:  # and none missed: consecutive seconds from the first
        times = sorted(t for j, t in keys if j == job.id)
        assert times[0] == now and len(times) >= 3
        assert all((b - a).total_seconds() == 1 for a, b in itertools.pairwise(times))
