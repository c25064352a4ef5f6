"""Conformance: scheduler shard leases and the epoch guard on materialisation."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cronwheel.core.model import ShardGuard, shard_key
from cronwheel.store.base import JobAdvance, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _two_jobs_in_different_shards(store: Store) -> tuple[list[str], int]:
    jobs = [make_job(next_fire_at=at(0)) for _ in range(20)]
    await store.create_jobs(jobs)
    shards = {shard_key(j.id) % 2 for j in jobs}
    assert shards == {0, 1}
    return [j.id for j in jobs], 2


class ShardsContract:
    """Scheduler shard leases and the epoch guard on materialisation.

    Part of the ``leases`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_acquire_renew_and_take_over_at_expiry(self, store: Store) -> None:
        [a] = await store.acquire_shards("s1", [0], now=at(0), ttl_seconds=10)
        assert (a.holder, a.epoch, a.expires_at) == ("s1", 1, at(10))
        assert await store.acquire_shards("s2", [0], now=at(9), ttl_seconds=10) == []
        [renewed] = await store.acquire_shards("s1", [0], now=at(5), ttl_seconds=10)
        assert (renewed.epoch, renewed.expires_at) == (1, at(15))
        assert await store.acquire_shards("s2", [0], now=at(14.999), ttl_seconds=10) == []
        [taken] = await store.acquire_shards("s2", [0], now=at(15), ttl_seconds=10)
        assert (taken.holder, taken.epoch) == ("s2", 2)
        assert await store.acquire_shards("s1", [0], now=at(16), ttl_seconds=10) == []

    async def test_release_frees_a_shard_for_the_next_holder(self, store: Store) -> None:
        await store.acquire_shards("s1", [0, 1, 2], now=at(0), ttl_seconds=60)
        await store.release_shards("s1", [1, 2])
        await store.release_shards("s2", [0])  # not its shard: nothing happens
        got = await store.acquire_shards("s2", [0, 1, 2], now=at(1), ttl_seconds=60)
        assert [(lease.shard, lease.epoch) for lease in got] == [(1, 2), (2, 2)]
        holders = {lease.shard: lease.holder for lease in await store.list_shard_leases()}
        assert holders == {0: "s1", 1: "s2", 2: "s2"}

    async def test_racing_schedulers_split_the_shards_without_overlap(
        self, store: Store, store2: Store
    ) -> None:
        shards = list(range(32))
        results = await asyncio.gather(
            *(
                s.acquire_shards(f"s{i}", shards, now=at(0), ttl_seconds=60)
                for i, s in enumerate([store, store2] * 2)
            )
        )
        owned = [lease.shard for leases in results for lease in leases]
        assert sorted(owned) == shards

    async def test_the_guard_lets_the_holder_write_its_shards_only(self, store: Store) -> None:
        job_ids, count = await _two_jobs_in_different_shards(store)
        [lease] = await store.acquire_shards("s1", [0], now=await store.now(), ttl_seconds=60)
        jobs = [await store.get_job("default", j) for j in job_ids]
        runs = [make_run(j, at(0)) for j in jobs if j]
        advances = [
            JobAdvance(j.id, 1, at(60), at(0), expected_next_fire_at=at(0)) for j in jobs if j
        ]
        guard = ShardGuard("s1", {0: lease.epoch}, count)
        result = await store.materialize_runs(runs, advances, guard=guard)
        mine = [j for j in job_ids if shard_key(j) % 2 == 0]
        assert (result.inserted, result.advanced) == (len(mine), len(mine))
        assert sorted(result.stale_jobs) == sorted(set(job_ids) - set(mine))
        assert {r.job_id for r in await store.list_runs("default", limit=100)} == set(mine)

    async def test_a_former_owner_cannot_write_after_a_takeover(self, store: Store) -> None:
        job = make_job(next_fire_at=at(0))
        await store.create_jobs([job])
        shard = shard_key(job.id) % 4
        now = await store.now()
        [old] = await store.acquire_shards("s1", [shard], now=now, ttl_seconds=0.001)
        await asyncio.sleep(0.01)  # let the 1 ms lease lapse on the store's clock
        [new] = await store.acquire_shards("s2", [shard], now=await store.now(), ttl_seconds=60)
        assert new.epoch == old.epoch + 1
        stale_guard = ShardGuard("s1", {shard: old.epoch}, 4)
        written = await store.materialize_runs(
            [make_run(job, at(0))],
            [JobAdvance(job.id, 1, at(60), at(0), expected_next_fire_at=at(0))],
            guard=stale_guard,
        )
        assert (written.inserted, written.advanced, written.stale_jobs) == (0, 0, [job.id])
        fresh_guard = ShardGuard("s2", {shard: new.epoch}, 4)
        written = await store.materialize_runs(
            [make_run(job, at(0))],
            [JobAdvance(job.id, 1, at(60), at(0), expected_next_fire_at=at(0))],
            guard=fresh_guard,
        )
        assert (written.inserted, written.advanced) == (1, 1)

    async def test_an_expired_lease_guards_nothing(self, store: Store) -> None:
        job = make_job(next_fire_at=at(0))
        await store.create_jobs([job])
        shard = shard_key(job.id) % 4
        an_hour_ago = await store.now() - timedelta(hours=1)
        [lease] = await store.acquire_shards("s1", [shard], now=an_hour_ago, ttl_seconds=60)
        guard = ShardGuard("s1", {shard: lease.epoch}, 4)
        written = await store.materialize_runs([make_run(job, at(0))], [], guard=guard)
        assert written.inserted == 0
