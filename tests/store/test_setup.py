"""Conformance: migrations, the store clock and wake-ups."""

from __future__ import annotations

from cronwheel.store.conformance.setup.setup import SetupContract


class TestSetup(SetupContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
