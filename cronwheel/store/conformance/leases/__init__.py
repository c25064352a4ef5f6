"""The ``leases`` seam's contract. Shard leases and pool rate limits."""

from __future__ import annotations

from cronwheel.store.conformance.leases.pool_rates import PoolRatesContract
from cronwheel.store.conformance.leases.shards import ShardsContract


class LeasesSuite(
    PoolRatesContract,
    ShardsContract,
):
    """Every test of the ``leases`` seam: subclass it with a ``store`` fixture."""


__all__ = ["LeasesSuite", "PoolRatesContract", "ShardsContract"]
