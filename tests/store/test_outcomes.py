"""Conformance: truthful states. A job's last outcome, why a run is dead, a permanent
attempt, idempotent control verbs, and which pools live workers serve."""

from __future__ import annotations

from cronwheel.store.conformance.queue.outcomes import OutcomesContract


class TestOutcomes(OutcomesContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
