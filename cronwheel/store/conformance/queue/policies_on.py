"""Conformance: a pool whose runs used none of the claim's policies keeps every limit the
moment one is turned on: a job with a concurrency key, a second tenant, a job with an
overlap policy, a cap on the tenant (decision 0047: PostgreSQL claims such a pool with a
lean statement until then)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from cronwheel.core.model import Job, Overlap, RunState, Tenant
from cronwheel.store.base import Claim, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


async def _claim(store: Store, limit: int, now: float = 0.0, **kw: Any) -> Claim:
    return await store.claim_runs(
        "w", ["default"], limit=limit, now=at(now), prefetch_until=at(now), lease_seconds=60, **kw
    )


async def _backlog(store: Store, job: Job, n: int, start: float = -500.0, **kw: Any) -> None:
    """``n`` due runs of ``job``, a millisecond apart from ``start`` (seconds from T0)."""
    await store.materialize_runs([make_run(job, at(start + i / 1000), **kw) for i in range(n)], [])


async def _running(store: Store, tenant_id: str = "default") -> list[Any]:
    return list(await store.list_runs(tenant_id, state=RunState.RUNNING, limit=1000))


class PoliciesOnContract:
    """A pool that used no claim policy keeps every limit once one is turned on.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_keyed_job_added_to_a_plain_pool_keeps_its_limit(self, store: Store) -> None:
        plain, keyed = make_job(), make_job()
        await store.create_jobs([plain, keyed])
        await _backlog(store, plain, 20)
        assert len(await _claim(store, 3)) == 3  # nothing but one tenant's plain runs
        await _backlog(store, keyed, 5, start=-900, concurrency_key="k", concurrency_limit=2)
        first = await _claim(store, 10)
        assert Counter(c.run.concurrency_key for c in first) == {"k": 2, None: 8}
        second = await _claim(store, 10)
        assert Counter(c.run.concurrency_key for c in second) == {None: 9}
        running = [r for r in await _running(store) if r.concurrency_key == "k"]
        assert len(running) == 2  # the key's limit, whichever claims came after

    async def test_a_second_tenant_gets_its_share_at_once(self, store: Store) -> None:
        await store.create_tenant(Tenant("b", "b", T0))
        a, b = make_job(), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 50)
        assert [c.run.tenant_id for c in await _claim(store, 4)] == ["default"] * 4
        await _backlog(store, b, 10, start=-100)  # younger: FIFO would leave them behind
        claimed = await _claim(store, 10)
        assert Counter(c.run.tenant_id for c in claimed) == {"default": 5, "b": 5}

    async def test_a_job_with_an_overlap_policy_runs_one_at_a_time(self, store: Store) -> None:
        plain, queued = make_job(), make_job(overlap=Overlap.QUEUE)
        await store.create_jobs([plain, queued])
        await _backlog(store, plain, 10)
        assert len(await _claim(store, 2)) == 2
        await _backlog(store, queued, 3, start=-600, overlap=Overlap.QUEUE)
        first = await _claim(store, 10)
        assert Counter(c.run.job_id for c in first) == {queued.id: 1, plain.id: 8}
        assert [c.run.job_id for c in await _claim(store, 10)] == []  # the job waits
        assert [r.job_id for r in await _running(store)].count(queued.id) == 1

    async def test_a_cap_set_on_a_tenant_holds_at_its_next_claim(self, store: Store) -> None:
        await store.create_tenant(Tenant("t", "t", T0))
        job = make_job(tenant_id="t")
        await store.create_jobs([job])
        await _backlog(store, job, 30)
        assert len(await _claim(store, 3)) == 3
        await store.update_tenant(Tenant("t", "t", T0, max_running=5))
        assert len(await _claim(store, 10)) == 2  # its room: 5 less the 3 running
        assert len(await _claim(store, 10)) == 0
        assert len(await _running(store, "t")) == 5

    async def test_keyed_runs_arriving_while_plain_ones_are_claimed_keep_the_limit(
        self, store: Store, store2: Store
    ) -> None:
        # Claimers drain a plain backlog while keyed runs of limit 2 arrive between their
        # claims: whichever statement each claim used, no more than 2 ever run.
        plain, keyed = make_job(), make_job()
        await store.create_jobs([plain, keyed])
        await _backlog(store, plain, 200)

        async def drain(s: Store) -> None:
            # Each claim is a round trip: the writer's inserts land between them.
            while len(await _claim(s, 5)):
                pass

        async def arrive() -> None:
            for i in range(10):
                await _backlog(
                    store, keyed, 3, start=-1000 + i, concurrency_key="k", concurrency_limit=2
                )

        await asyncio.gather(drain(store), drain(store2), arrive())
        await asyncio.gather(drain(store), drain(store2))
        running = await _running(store)
        assert len(running) == 202  # every plain run, and the key's limit of keyed ones
        assert Counter(r.concurrency_key for r in running) == {None: 200, "k": 2}
