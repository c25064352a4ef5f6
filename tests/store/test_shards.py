"""Conformance: scheduler shard leases and the epoch guard on materialisation."""

from __future__ import annotations

from cronwheel.store.conformance.leases.shards import ShardsContract


class TestShards(ShardsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
