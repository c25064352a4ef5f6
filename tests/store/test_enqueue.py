"""Conformance: runs enqueued to a manual job, each with its own payload."""

from __future__ import annotations

from cronwheel.store.conformance.queue.enqueue import EnqueueContract


class TestEnqueue(EnqueueContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
