"""The ``housekeeping`` seam's contract. History's archive of finished runs."""

from __future__ import annotations

from cronwheel.store.conformance.housekeeping.run_archive import RunArchiveContract


class HousekeepingSuite(
    RunArchiveContract,
):
    """Every test of the ``housekeeping`` seam: subclass it with a ``store`` fixture."""


__all__ = ["HousekeepingSuite", "RunArchiveContract"]
