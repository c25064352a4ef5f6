"""The ``run_control`` seam's contract. Cancel, replay, retention of finished runs."""

from __future__ import annotations

from cronwheel.store.conformance.run_control.control import ControlContract


class RunControlSuite(
    ControlContract,
):
    """Every test of the ``run_control`` seam: subclass it with a ``store`` fixture."""


__all__ = ["ControlContract", "RunControlSuite"]
