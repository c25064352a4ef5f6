"""Conformance: claiming runs — order, pools, prefetch, leases, fences (I3)."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.store.conformance.queue.claims import ClaimsContract


class TestClaims(ClaimsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


class TestClaimsFullStatement(ClaimsContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
