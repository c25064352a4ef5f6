"""Conformance: per-pool rate limits (decision 0033) — a token bucket per limited pool,
taken by claims in one statement, refilled at the pool's rate, one second's worth at
most; on both stores, with an injected clock."""

from __future__ import annotations

from cronwheel.store.conformance.leases.pool_rates import PoolRatesContract


class TestPoolRates(PoolRatesContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
