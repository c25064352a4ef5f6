"""Conformance: no claim exceeds a run's attempt budget, and an at-most-once run that
started is never started again, whatever releases and rescues happen (issue 13, item 12)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.attempt_budget import AttemptBudgetContract


class TestAttemptBudget(AttemptBudgetContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
