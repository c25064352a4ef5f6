"""Conformance: overlap policies applied at claim time, one run per job at a time."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.store.conformance.queue.overlap import OverlapContract


class TestOverlap(OverlapContract):
    """The shared contract, on each backend (the ``store`` fixture)."""


class TestOverlapFullStatement(OverlapContract):
    """The same contract through PostgreSQL's full claim statement alone: the ``store``
    above claims one tenant's plain pools with the lean one (decision 0047)."""

    @pytest.fixture
    def store(self, full_claim_store: Any) -> Any:
        return full_claim_store
