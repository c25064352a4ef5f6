"""Conformance: an attempt keeps its command's output; a worker its allowed commands."""

from __future__ import annotations

from cronwheel.store.conformance.queue.attempt_output import AttemptOutputContract


class TestAttemptOutput(AttemptOutputContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
