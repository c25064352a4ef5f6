"""The ``history`` seam's contract. Lists and history: attempts, activity, audit, the dead-letter queue."""

from __future__ import annotations

from cronwheel.store.conformance.history.activity import ActivityContract
from cronwheel.store.conformance.history.audit_log import AuditLogContract
from cronwheel.store.conformance.history.dead_list import DeadListContract
from cronwheel.store.conformance.history.history import HistoryContract


class HistorySuite(
    ActivityContract,
    AuditLogContract,
    DeadListContract,
    HistoryContract,
):
    """Every test of the ``history`` seam: subclass it with a ``store`` fixture."""


__all__ = [
    "ActivityContract",
    "AuditLogContract",
    "DeadListContract",
    "HistoryContract",
    "HistorySuite",
]
