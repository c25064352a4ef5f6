"""The ``outbox`` seam's contract. The notification outbox."""

from __future__ import annotations

from cronwheel.store.conformance.outbox.notifications import NotificationsContract


class OutboxSuite(
    NotificationsContract,
):
    """Every test of the ``outbox`` seam: subclass it with a ``store`` fixture."""


__all__ = ["NotificationsContract", "OutboxSuite"]
