"""Conformance: attempts are charged only when made (issue 26, item 3). A run claimed
ahead of its start (``claim_runs(started=False)``) has no ``started_at`` until the worker
marks it started (``mark_started``) or completes it; a rescue of such a run unclaims it,
as a release before the start does, instead of charging it a lost attempt."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.store.conformance.queue.claimed_ahead import ClaimedAheadContract


class TestClaimedAhead(ClaimedAheadContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


class TestClaimedAheadFullStatement(ClaimedAheadContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
