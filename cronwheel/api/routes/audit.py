"""``/v1/audit``: who changed what, when (admins only).

Every change to a job, a run's control (cancel, replay), a pipeline, a tenant or an API
key is written to the audit log in the transaction of the change; this lists it newest
first. A tenant's admin reads its own tenant's entries; a system admin reads every
tenant's (or one's, with ``tenant``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import AwareDatetime

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import TenantId
from cronwheel.api.openapi import problems
from cronwheel.web.auth import Admin, Principal
from cronwheel.web.pagination import DEFAULT_LIMIT, Cursor, Limit, before_id, page
from cronwheel.web.problems import ApiProblem, invalid
from cronwheel.web.schemas import AuditOut, Page, dump
from cronwheel.web.state import api_state

router = APIRouter(tags=["admin"], route_class=GuardedRoute)

Entity = Literal["job", "run", "pipeline", "tenant", "key"]


def _scope(principal: Principal, tenant: str | None) -> str | None:
    """Whose entries: ``tenant`` if the caller may read it (403 otherwise); without
    it, the caller's tenant, or every tenant (None) for a system admin acting as itself."""
    if tenant is not None:
        if tenant != principal.tenant_id and not principal.system_admin:
            raise ApiProblem(403, "only a system admin reads the audit log of another tenant")
        return tenant
    if principal.system_admin and principal.home_tenant_id is None:
        return None
    return principal.tenant_id


@router.get(
    "/v1/audit",
    response_model=Page[AuditOut],
    responses=problems(),
    summary="List audit log entries",
)
async def list_audit(
    request: Request,
    principal: Admin,
    tenant: Annotated[
        TenantId | None,
        Query(description="One tenant's entries (another than yours: system admins only)."),
    ] = None,
    actor: Annotated[
        str | None,
        Query(max_length=200, description="Who acted: `key:<key id>`, `admin-token`, `python`…"),
    ] = None,
    entity: Annotated[Entity | None, Query(description="One kind of entity.")] = None,
    since: Annotated[
        AwareDatetime | None, Query(description="Entries at or after this instant.")
    ] = None,
    until: Annotated[
        AwareDatetime | None, Query(description="Entries before this instant.")
    ] = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Newest first; follow ``next_cursor`` for older entries."""
    if since is not None and until is not None and until <= since:
        raise invalid("until", "must be after since")
    found = await api_state(request).store.list_audit_entries(
        tenant_id=_scope(principal, tenant),
        actor=actor,
        entity=entity,
        since=_utc(since),
        until=_utc(until),
        before=before_id("audit", cursor),
        limit=limit + 1,
    )
    items, next_cursor = page(found, limit, "audit", "id")
    return {"items": [dump(AuditOut.of(e)) for e in items], "next_cursor": next_cursor}


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)
