"""Conformance: the reads of the dashboard's overview, the attempts of the last hour per
pool and minute, and the tenant's jobs per state."""

from __future__ import annotations

from cronwheel.store.conformance.history.history import HistoryContract


class TestHistory(HistoryContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
