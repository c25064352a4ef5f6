"""Conformance: no claim exceeds a run's attempt budget, and an at-most-once run that
started is never started again, whatever releases and rescues happen (issue 13, item 12)."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.store.conformance.queue.attempt_budget import AttemptBudgetContract


class TestAttemptBudget(AttemptBudgetContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


class TestAttemptBudgetFullStatement(AttemptBudgetContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
