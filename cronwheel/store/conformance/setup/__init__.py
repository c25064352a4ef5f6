"""The ``setup`` seam's contract. Migrations, the store's clock, wake-ups."""

from __future__ import annotations

from cronwheel.store.conformance.setup.setup import SetupContract


class SetupSuite(
    SetupContract,
):
    """Every test of the ``setup`` seam: subclass it with a ``store`` fixture."""


__all__ = ["SetupContract", "SetupSuite"]
