"""Conformance: overlap policies applied at claim time, one run per job at a time."""

from __future__ import annotations

from cronwheel.store.conformance.queue.overlap import OverlapContract


class TestOverlap(OverlapContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
