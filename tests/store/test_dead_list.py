"""Conformance: the dead-letter listing (``list_dead``) with its filters, its cursor, its
jobs' names and each run's last error, on every store."""

from __future__ import annotations

from cronwheel.store.conformance.history.dead_list import DeadListContract


class TestDeadList(DeadListContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
