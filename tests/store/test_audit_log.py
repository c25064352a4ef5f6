"""Conformance: the audit log read across entities, changes to tenants and keys audited
in their own transaction, and jobs' actions rewritten (secrets resealed) only at the
version read."""

from __future__ import annotations

from cronwheel.store.conformance.history.audit_log import AuditLogContract


class TestAuditLog(AuditLogContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
