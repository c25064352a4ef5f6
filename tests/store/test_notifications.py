"""Conformance: completion notifications. The statements that change a run's state write
the outbox rows of its job's targets in the same write, and only for them; the notifier's
claim, lease, delivery, retry, dead letter, replay and retention."""

from __future__ import annotations

from cronwheel.store.conformance.outbox.notifications import NotificationsContract


class TestNotifications(NotificationsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
