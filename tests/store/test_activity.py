"""Conformance: the live view's read of recent activity (the ``cronwheel dev`` console)."""

from __future__ import annotations

from cronwheel.store.conformance.history.activity import ActivityContract


class TestActivity(ActivityContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
