"""Conformance: tenant limits kept in the store, so that they hold for every process on
it (issue 17, defect 6; decision 0027): the run-creation token bucket
(:meth:`Store.take_create_tokens`) and ``max_jobs`` checked inside ``create_jobs``."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest

from cronwheel.core.model import Tenant
from cronwheel.errors import OverLimit
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0, at, make_job


async def tenant(store: Store, tenant_id: str = "acme", **limits: float | None) -> str:
    await store.create_tenant(Tenant(id=tenant_id, name=tenant_id, created_at=T0, **limits))  # type: ignore[arg-type]
    return tenant_id


class TenantLimitsContract:
    """Tenant limits kept in the store, so that they hold for every process on.

    Part of the ``catalogue`` seam's contract: subclass it with a ``store`` fixture to
    run it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_tenant_without_the_limit_is_always_granted(self, store: Store) -> None:
        free = await tenant(store, "free")
        for _ in range(3):
            took = await store.take_create_tokens(free, 10_000, now=T0)
            assert took.granted and took.rate is None
        unknown = await store.take_create_tokens("nobody", 1, now=T0)
        assert unknown.granted and unknown.rate is None

    async def test_the_bucket_refills_at_the_rate_from_the_injected_clock(
        self, store: Store
    ) -> None:
        acme = await tenant(store, max_creates_per_second=2)
        # A bucket never used is full: one second's worth, 2 tokens.
        assert (await store.take_create_tokens(acme, 2, now=T0)).granted
        refused = await store.take_create_tokens(acme, 1, now=T0)
        assert not refused.granted and refused.rate == 2
        assert refused.retry_after == pytest.approx(0.5)
        # A quarter of a second refills half a token: still short, and the refusal took none.
        assert not (await store.take_create_tokens(acme, 1, now=at(0.25))).granted
        assert (await store.take_create_tokens(acme, 1, now=at(0.5))).granted
        # Idle for an hour: full again, never more than one second's worth.
        assert (await store.take_create_tokens(acme, 2, now=at(3600))).granted
        assert not (await store.take_create_tokens(acme, 1, now=at(3600))).granted

    async def test_a_batch_takes_all_its_tokens_at_once(self, store: Store) -> None:
        acme = await tenant(store, max_creates_per_second=10)
        assert (await store.take_create_tokens(acme, 7, now=T0)).granted
        # 3 left: a batch of 4 is refused whole, a batch of 3 granted whole.
        refused = await store.take_create_tokens(acme, 4, now=T0)
        assert not refused.granted and refused.retry_after == pytest.approx(0.1)
        assert (await store.take_create_tokens(acme, 3, now=T0)).granted
        assert not (await store.take_create_tokens(acme, 1, now=T0)).granted

    async def test_a_batch_larger_than_a_second_leaves_the_bucket_in_debt(
        self, store: Store
    ) -> None:
        acme = await tenant(store, max_creates_per_second=2)
        assert (await store.take_create_tokens(acme, 6, now=T0)).granted  # a full bucket: -4
        # Two seconds later the debt is paid, nothing more: a create waits another half second.
        refused = await store.take_create_tokens(acme, 1, now=at(2))
        assert not refused.granted and refused.retry_after == pytest.approx(0.5)
        assert (await store.take_create_tokens(acme, 1, now=at(2.5))).granted

    async def test_a_rate_under_one_per_second_lets_one_through_now_and_then(
        self, store: Store
    ) -> None:
        acme = await tenant(store, max_creates_per_second=0.01)
        assert (await store.take_create_tokens(acme, 1, now=T0)).granted
        refused = await store.take_create_tokens(acme, 1, now=at(50))
        assert not refused.granted and refused.retry_after == pytest.approx(50)
        assert (await store.take_create_tokens(acme, 1, now=at(100))).granted

    async def test_a_clock_behind_refills_nothing_and_does_not_move_the_bucket_back(
        self,
        store: Store,
    ) -> None:
        acme = await tenant(store, max_creates_per_second=1)
        assert (await store.take_create_tokens(acme, 1, now=at(10))).granted
        # Another process whose clock is 5 s behind: no refill from "negative" time ...
        assert not (await store.take_create_tokens(acme, 1, now=at(5))).granted
        # ... and the bucket's time stayed at 10 s: at 10.5 s half a token, at 11 s one.
        assert not (await store.take_create_tokens(acme, 1, now=at(10.5))).granted
        assert (await store.take_create_tokens(acme, 1, now=at(11))).granted

    async def test_concurrent_takers_on_two_connections_never_spend_a_token_twice(
        self, store: Store, store2: Store
    ) -> None:
        acme = await tenant(store, max_creates_per_second=10)
        takes = [s.take_create_tokens(acme, 1, now=T0) for _ in range(20) for s in (store, store2)]
        answers = await asyncio.gather(*takes)
        assert sum(a.granted for a in answers) == 10

    async def test_max_jobs_refuses_a_create_that_would_go_over_it_writing_nothing(
        self,
        store: Store,
    ) -> None:
        acme = await tenant(store, max_jobs=3)
        await store.create_jobs([make_job(tenant_id=acme) for _ in range(2)])
        over = [make_job(tenant_id=acme) for _ in range(2)]
        with pytest.raises(OverLimit) as refused:
            await store.create_jobs(over)
        assert refused.value.limit == "max_jobs" and refused.value.retry_after >= 1
        assert "2 live jobs" in refused.value.reason
        assert await store.count_live_jobs(acme) == 2
        assert await store.get_job(acme, over[0].id) is None
        await store.create_jobs(over[:1])
        assert await store.count_live_jobs(acme) == 3
        # Other tenants have their own count.
        await store.create_jobs([make_job() for _ in range(5)])

    async def test_max_jobs_holds_across_concurrent_creates_on_two_connections(
        self, store: Store, store2: Store
    ) -> None:
        acme = await tenant(store, max_jobs=5)

        async def create(s: Store) -> bool:
            try:
                await s.create_jobs([make_job(tenant_id=acme)])
            except OverLimit:
                return False
            return True

        created = await asyncio.gather(*(create(s) for _ in range(8) for s in (store, store2)))
        assert sum(created) == 5
        assert await store.count_live_jobs(acme) == 5

    async def test_the_bucket_is_kept_when_an_admin_changes_the_rate(self, store: Store) -> None:
        acme = await tenant(store, max_creates_per_second=5)
        assert (await store.take_create_tokens(acme, 5, now=T0)).granted
        current = await store.get_tenant(acme)
        assert current is not None
        await store.update_tenant(replace(current, max_creates_per_second=1))
        # Changing the rate does not hand out a fresh bucket: still empty at T0.
        assert not (await store.take_create_tokens(acme, 1, now=T0)).granted
        assert (await store.take_create_tokens(acme, 1, now=T0 + timedelta(seconds=1))).granted
