"""Conformance: per-pool rate limits (decision 0033) — a token bucket per limited pool,
taken by claims in one statement, refilled at the pool's rate, one second's worth at
most; on both stores, with an injected clock."""

from __future__ import annotations

from datetime import timedelta

from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import T0


class PoolRatesContract:
    """Per-pool rate limits (decision 0033) — a token bucket per limited pool,.

    Part of the ``leases`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    async def test_a_pool_without_a_rate_is_unlimited(self, store: Store) -> None:
        assert await store.pool_rates() == {}
        assert await store.take_pool_tokens("crm", 50, now=T0) is None

    async def test_the_bucket_starts_full_refills_at_the_rate_and_holds_a_second(
        self,
        store: Store,
    ) -> None:
        await store.set_pool_rate("crm", 10.0, now=T0)
        assert await store.pool_rates() == {"crm": 10.0}
        assert await store.take_pool_tokens("crm", 4, now=T0) == 4
        assert await store.take_pool_tokens("crm", 50, now=T0) == 6  # what was left
        assert await store.take_pool_tokens("crm", 50, now=T0) == 0
        half = T0 + timedelta(milliseconds=500)
        assert await store.take_pool_tokens("crm", 50, now=half) == 5  # 10/s for 0.5 s
        later = half + timedelta(minutes=5)
        assert await store.take_pool_tokens("crm", 50, now=later) == 10  # never over a second's
        # A clock behind the last refill refills nothing.
        assert await store.take_pool_tokens("crm", 50, now=half) == 0

    async def test_tokens_given_back_can_be_taken_again_and_slow_rates_still_start(
        self,
        store: Store,
    ) -> None:
        await store.set_pool_rate("slow", 0.5, now=T0)  # one run every two seconds
        assert await store.take_pool_tokens("slow", 3, now=T0) == 1
        assert await store.take_pool_tokens("slow", -1, now=T0) == -1  # the claim found none
        assert await store.take_pool_tokens("slow", 3, now=T0) == 1
        assert await store.take_pool_tokens("slow", 3, now=T0 + timedelta(seconds=1)) == 0
        assert await store.take_pool_tokens("slow", 3, now=T0 + timedelta(seconds=2)) == 1

    async def test_changing_or_removing_a_rate(self, store: Store) -> None:
        await store.set_pool_rate("crm", 100.0, now=T0)
        await store.set_pool_rate("crm", 2.0, now=T0)  # a lower rate caps what is in the bucket
        assert await store.take_pool_tokens("crm", 50, now=T0) == 2
        await store.set_pool_rate("crm", None, now=T0)
        assert await store.pool_rates() == {}
        assert await store.take_pool_tokens("crm", 50, now=T0) is None
