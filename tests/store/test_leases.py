"""Conformance: heartbeats, fenced completion, and rescue of expired leases (I3, I4)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.leases import LeasesContract


class TestLeases(LeasesContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
