"""Conformance: claiming runs — order, pools, prefetch, leases, fences (I3)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.claims import ClaimsContract


class TestClaims(ClaimsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
