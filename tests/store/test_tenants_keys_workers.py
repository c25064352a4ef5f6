"""Conformance: tenants and their quotas, API keys, idempotent responses, the worker
registry."""

from __future__ import annotations

from cronwheel.store.conformance.catalogue.tenants_keys_workers import TenantsKeysWorkersContract


class TestTenantsKeysWorkers(TenantsKeysWorkersContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
