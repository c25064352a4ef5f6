"""Conformance: a run's progress and checkpoint, stored fenced with the heartbeat or the
completion, and kept for the run's next attempts (0009)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.progress_checkpoints import ProgressCheckpointsContract


class TestProgressCheckpoints(ProgressCheckpointsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
