"""Conformance: claims are fair across tenants, priorities order work within a tenant,
and low priority cannot starve (decision 0028)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from datetime import timedelta

from cronwheel.core.model import AttemptOutcome, Job, Priority, RunState, Tenant
from cronwheel.store.base import Claim, Completion, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run


async def _tenant(store: Store, tenant_id: str, **settings: object) -> None:
    await store.create_tenant(Tenant(tenant_id, tenant_id, T0, **settings))  # type: ignore[arg-type]


async def _backlog(store: Store, job: Job, n: int, start: float = -1000.0) -> None:
    """``n`` due runs of ``job``, one a millisecond from ``start`` (seconds from T0)."""
    runs = [make_run(job, at(start + i / 1000)) for i in range(n)]
    for i in range(0, n, 5000):
        await store.materialize_runs(runs[i : i + 5000], [])


async def _claim(store: Store, limit: int, now: float = 0.0, **kw: object) -> Claim:
    return await store.claim_runs(
        "w",
        ["default"],
        limit=limit,
        now=at(now),
        prefetch_until=at(now),
        lease_seconds=60,
        **kw,  # type: ignore[arg-type]
    )


def _tenants(claim: Claim) -> list[str]:
    return [c.run.tenant_id for c in claim]


class FairClaimsContract:
    """Claims are fair across tenants, priorities order work within a tenant,.

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_one_due_run_of_another_tenant_is_not_behind_a_backlog(
        self, store: Store
    ) -> None:
        # FIFO would take 10 of A's 2,000 older runs and leave B's to wait for the backlog.
        await _tenant(store, "a")
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 2000)
        await store.materialize_runs([make_run(b, at(-1))], [])
        claimed = await _claim(store, 10)
        assert len(claimed) == 10
        assert Counter(_tenants(claimed)) == {"a": 9, "b": 1}
        # B's run is taken in the first round, beside A's first: not after A's batch.
        assert _tenants(claimed)[:2] == ["a", "b"]

    async def test_tenants_with_backlogs_share_each_claim_round_by_round(
        self, store: Store
    ) -> None:
        for t in ("a", "b", "c"):
            await _tenant(store, t)
        jobs = {t: make_job(tenant_id=t) for t in ("a", "b", "c")}
        await store.create_jobs(list(jobs.values()))
        await _backlog(store, jobs["a"], 300, start=-3000)  # the oldest: FIFO would take only A
        await _backlog(store, jobs["b"], 300, start=-2000)
        await _backlog(store, jobs["c"], 300, start=-1000)
        claimed = await _claim(store, 30)
        assert Counter(_tenants(claimed)) == {"a": 10, "b": 10, "c": 10}
        assert _tenants(claimed)[:6] == ["a", "b", "c", "a", "b", "c"]

    async def test_a_tenant_weight_is_its_share_of_each_claim(self, store: Store) -> None:
        await _tenant(store, "a", claim_weight=3.0)
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 500, start=-500)
        await _backlog(store, b, 500, start=-2000)  # older: weight, not age, decides
        claimed = await _claim(store, 40)
        assert Counter(_tenants(claimed)) == {"a": 30, "b": 10}

    async def test_weights_are_read_from_the_tenant_and_can_change(self, store: Store) -> None:
        await _tenant(store, "a")
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 500)
        await _backlog(store, b, 500)
        assert Counter(_tenants(await _claim(store, 20))) == {"a": 10, "b": 10}
        tenant = await store.get_tenant("b")
        assert tenant is not None and tenant.claim_weight == 1.0
        assert (await store.update_tenant(replace(tenant, claim_weight=4.0))).claim_weight == 4.0
        assert Counter(_tenants(await _claim(store, 20))) == {"a": 4, "b": 16}

    async def test_a_claim_left_short_by_the_shares_is_topped_up(self, store: Store) -> None:
        # Two tenants waiting: each share is half the batch, but B has one run. The rest of
        # the batch still comes from A: fairness does not cost claim rate.
        await _tenant(store, "a")
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 500)
        await store.materialize_runs([make_run(b, at(-1)), make_run(b, at(3600))], [])
        claimed = await _claim(store, 100)
        assert Counter(_tenants(claimed)) == {"a": 99, "b": 1}
        assert len({c.run.id for c in claimed}) == 100

    async def test_priority_orders_runs_within_a_tenant(self, store: Store) -> None:
        await _tenant(store, "a")
        await _tenant(store, "b")
        a_low = make_job(tenant_id="a", priority=Priority.LOW)
        a_high = make_job(tenant_id="a", priority=Priority.HIGH)
        b_normal = make_job(tenant_id="b")
        await store.create_jobs([a_low, a_high, b_normal])
        await _backlog(store, a_low, 50, start=-100)
        await _backlog(store, a_high, 50, start=-10)
        await _backlog(store, b_normal, 50, start=-50)
        claimed = await _claim(store, 20)
        by_tenant = [c.run.job_id for c in claimed if c.run.tenant_id == "a"]
        assert by_tenant == [a_high.id] * 10  # the high runs first, though the low are older
        assert Counter(_tenants(claimed)) == {"a": 10, "b": 10}

    async def test_a_low_run_under_a_steady_stream_of_high_ones_still_starts(
        self, store: Store
    ) -> None:
        # Each second, 10 new high runs come due and the worker has room for 10: by priority
        # alone the low run would wait forever. Aging raises it a level per period waited.
        low, high = make_job(priority=Priority.LOW), make_job(priority=Priority.HIGH)
        await store.create_jobs([low, high])
        await store.materialize_runs([make_run(low, at(0))], [])
        started_at = None
        for second in range(1, 60):
            await store.materialize_runs(
                [make_run(high, at(second) + timedelta(milliseconds=i)) for i in range(10)], []
            )
            claimed = await _claim(store, 10, now=second + 0.5, priority_aging_seconds=10)
            assert len(claimed) == 10
            if any(c.run.job_id == low.id for c in claimed):
                started_at = second
                break
        # Two periods raise low to high, and it is older than every high run then waiting.
        assert started_at is not None and 20 <= started_at <= 22

    async def test_without_aging_in_the_window_priority_wins(self, store: Store) -> None:
        low, high = make_job(priority=Priority.LOW), make_job(priority=Priority.HIGH)
        await store.create_jobs([low, high])
        await store.materialize_runs([make_run(low, at(-5))], [])
        await store.materialize_runs(
            [make_run(high, at(-1) + timedelta(milliseconds=i)) for i in range(5)], []
        )
        claimed = await _claim(store, 5, priority_aging_seconds=60)
        assert {c.run.job_id for c in claimed} == {high.id}

    async def test_a_remote_workers_claim_stays_within_its_tenant(self, store: Store) -> None:
        await _tenant(store, "a")
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 20)
        await _backlog(store, b, 20)
        claimed = await _claim(store, 30, tenant_id="b")
        assert Counter(_tenants(claimed)) == {"b": 20}

    # -- max_running: a tenant's runs in flight, cluster-wide ------------------------------
    async def test_a_tenant_at_its_max_running_waits_and_others_do_not(self, store: Store) -> None:
        await _tenant(store, "a", max_running=3)
        await _tenant(store, "b")
        a, b = make_job(tenant_id="a"), make_job(tenant_id="b")
        await store.create_jobs([a, b])
        await _backlog(store, a, 50)
        await _backlog(store, b, 50)
        first = await _claim(store, 20)
        assert Counter(_tenants(first)) == {"a": 3, "b": 17}  # B fills what A may not take
        second = await _claim(store, 20)
        assert Counter(_tenants(second)) == {"b": 20}  # A is at 3 running: its runs wait
        [one] = [c for c in first if c.run.tenant_id == "a"][:1]
        completion = Completion(
            one.run.id,
            one.run.fence,
            "w",
            RunState.SUCCEEDED,
            AttemptOutcome.SUCCEEDED,
            at(0),
            at(1),
        )
        assert await store.complete_runs([completion]) == [one.run.id]
        third = await _claim(store, 20, now=1)
        assert Counter(_tenants(third)) == {"a": 1, "b": 13}  # one finished: one more starts
        waiting = await store.list_runs("a", state=RunState.PENDING, limit=100)
        assert len(waiting) == 46  # above the cap, runs wait pending: not lost, not failed

    async def test_max_running_holds_alone_and_across_claimers(
        self, store: Store, store2: Store
    ) -> None:
        await _tenant(store, "a", max_running=5)
        a = make_job(tenant_id="a")
        await store.create_jobs([a])
        await _backlog(store, a, 100)
        claims = await asyncio.gather(
            *(_claim(s, 10) for s in (store, store2, store, store2)), return_exceptions=False
        )
        assert sum(len(c) for c in claims) == 5
        running = await store.list_runs("a", state=RunState.RUNNING, limit=100)
        assert len(running) == 5

    async def test_without_a_cap_a_tenant_takes_the_whole_batch(self, store: Store) -> None:
        await _tenant(store, "a")
        a = make_job(tenant_id="a")
        await store.create_jobs([a])
        await _backlog(store, a, 100)
        assert len(await _claim(store, 60)) == 60
