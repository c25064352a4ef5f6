"""What the audit log says of a tenant or a key change, the same in both stores."""

from __future__ import annotations

from typing import Any

from cronwheel.core.model import ApiKey, Tenant


def tenant_details(tenant: Tenant) -> dict[str, Any]:
    return {
        "name": tenant.name,
        "max_jobs": tenant.max_jobs,
        "max_creates_per_second": tenant.max_creates_per_second,
    }


def key_details(key: ApiKey) -> dict[str, Any]:
    """What an audit entry tells of a key: its role and name, never its hash."""
    return {"role": key.role.value, "name": key.name}
