"""Tenants and keys: each tenant's quotas and usage, and its API keys, for admins.

A system admin sees and manages every tenant; a tenant's admin sees only their own (any
other tenant is simply not found, as in the API). Every change (create a tenant, change
its quotas, create or revoke a key) is a call to ``/v1/tenants`` or ``/v1/keys`` from
``static/admin.js``: the pages only read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.core.model import ApiKey, Role, Tenant
from cronwheel.dashboard.render import PageRoute, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.errors import NotFound
from cronwheel.store.base import Store
from cronwheel.web.problems import ApiProblem
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)

_TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ROLES = (Role.READ, Role.WRITE, Role.ADMIN, Role.WORKER)
"""The roles a new key may have, least powerful first (the form's default is the first)."""


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """A tenant with what it uses of its quotas, as the pages show it."""

    tenant: Tenant
    live_jobs: int
    active_keys: int
    revoked_keys: int


def _require_admin(viewer: Viewer) -> None:
    """Only admin keys manage tenants and keys: anyone else gets the 403 page."""
    if not viewer.can("admin"):
        role = viewer.principal.role.value
        raise ApiProblem(
            403,
            f"Tenants and keys are managed with an admin key; this is a {role} key. "
            "Sign in with an admin key of your tenant to manage its keys.",
        )


async def _usage(store: Store, tenant: Tenant) -> TenantUsage:
    keys = await store.list_api_keys(tenant.id)
    revoked = sum(1 for k in keys if k.revoked_at is not None)
    return TenantUsage(tenant, await store.count_live_jobs(tenant.id), len(keys) - revoked, revoked)


async def _visible_tenant(store: Store, viewer: Viewer, tenant_id: str) -> Tenant:
    """The tenant ``tenant_id`` if this viewer may see it: a tenant admin sees only their
    own, and another tenant is not found (its existence is not revealed)."""
    if not viewer.can("system admin") and tenant_id != viewer.tenant_id:
        raise NotFound("tenant", tenant_id)
    tenant = await store.get_tenant(tenant_id) if _TENANT_ID.match(tenant_id) else None
    if tenant is None:
        raise NotFound("tenant", tenant_id)
    return tenant


def _key_order(key: ApiKey) -> tuple[bool, float]:
    """Keys in use first, newest first within each group."""
    return (key.revoked_at is not None, -key.created_at.timestamp())


@router.get("/ui/admin")
async def tenants(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    """Every tenant for a system admin, with quotas and usage; a tenant admin's own."""
    _require_admin(viewer)
    store = api_state(request).store
    if viewer.can("system admin"):
        listed = await store.list_tenants()
    else:
        own = await store.get_tenant(viewer.tenant_id)
        listed = [own] if own is not None else []
    rows = [await _usage(store, t) for t in sorted(listed, key=lambda t: t.id)]
    return page(
        request,
        viewer,
        "admin_tenants.html",
        title="Tenants & keys",
        rows=rows,
        system_admin=viewer.can("system admin"),
    )


@router.get("/ui/admin/tenants/{tenant_id}")
async def tenant(request: Request, viewer: CurrentViewer, tenant_id: str) -> HTMLResponse:
    """One tenant: its quotas (a system admin may change them), usage and API keys."""
    _require_admin(viewer)
    store = api_state(request).store
    found = await _visible_tenant(store, viewer, tenant_id)
    keys = sorted(await store.list_api_keys(found.id), key=_key_order)
    return page(
        request,
        viewer,
        "admin_tenant.html",
        title=f"Tenant {found.id}",
        usage=await _usage(store, found),
        keys=keys,
        roles=ROLES,
        own_key_id=_own_key_id(viewer),
        system_admin=viewer.can("system admin"),
    )


def _own_key_id(viewer: Viewer) -> str | None:
    """The id of the key the viewer signed in with (revoking it signs them out)."""
    actor = viewer.principal.actor
    return actor.removeprefix("key:") if actor.startswith("key:") else None
