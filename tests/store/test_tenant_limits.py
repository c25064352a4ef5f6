"""Conformance: tenant limits kept in the store, so that they hold for every process on
it (issue 17, defect 6; decision 0027): the run-creation token bucket
(:meth:`Store.take_create_tokens`) and ``max_jobs`` checked inside ``create_jobs``."""

from __future__ import annotations

from cronwheel.store.conformance.catalogue.tenant_limits import TenantLimitsContract


class TestTenantLimits(TenantLimitsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
