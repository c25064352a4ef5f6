"""The ``status`` seam's contract. Live reads: status counts and the metrics' gauges."""

from __future__ import annotations

from cronwheel.store.conformance.status.gauges import GaugesContract
from cronwheel.store.conformance.status.status import StatusContract


class StatusSuite(
    GaugesContract,
    StatusContract,
):
    """Every test of the ``status`` seam: subclass it with a ``store`` fixture."""


__all__ = ["GaugesContract", "StatusContract", "StatusSuite"]
