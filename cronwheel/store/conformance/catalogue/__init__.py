"""The ``catalogue`` seam's contract. Tenants, keys, quotas, idempotent answers, jobs and pipeline definitions."""

from __future__ import annotations

from cronwheel.store.conformance.catalogue.bulk_create import BulkCreateContract
from cronwheel.store.conformance.catalogue.job_orders import JobOrdersContract
from cronwheel.store.conformance.catalogue.jobs import JobsContract
from cronwheel.store.conformance.catalogue.pipelines import PipelinesContract
from cronwheel.store.conformance.catalogue.tenant_limits import TenantLimitsContract
from cronwheel.store.conformance.catalogue.tenants_keys_workers import TenantsKeysWorkersContract


class CatalogueSuite(
    BulkCreateContract,
    JobOrdersContract,
    JobsContract,
    PipelinesContract,
    TenantLimitsContract,
    TenantsKeysWorkersContract,
):
    """Every test of the ``catalogue`` seam: subclass it with a ``store`` fixture."""


__all__ = [
    "BulkCreateContract",
    "CatalogueSuite",
    "JobOrdersContract",
    "JobsContract",
    "PipelinesContract",
    "TenantLimitsContract",
    "TenantsKeysWorkersContract",
]
