"""``/v1/tenants`` (system admins) and ``/v1/keys`` (admins): who may use the API."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import KeyIn, TenantId, TenantIn, TenantPatch
from cronwheel.api.openapi import problems
from cronwheel.core.ids import is_uuid
from cronwheel.core.model import ApiKey, Tenant, new_id
from cronwheel.errors import NotFound
from cronwheel.web.auth import Admin, Principal, SystemAdmin, hash_token, new_token
from cronwheel.web.problems import ApiProblem
from cronwheel.web.schemas import KeyOut, NewKeyOut, Page, TenantOut, dump
from cronwheel.web.state import ApiState, api_state

router = APIRouter(tags=["admin"], route_class=GuardedRoute)

_TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TenantPath = Annotated[str, Path(max_length=64, description="A tenant id.")]
KeyPath = Annotated[str, Path(max_length=64, description="An API key id.")]
TenantQuery = Annotated[
    TenantId | None, Query(description="Another tenant's keys (system admins only).")
]


# -- tenants ---------------------------------------------------------------------------------
async def _tenant(state: ApiState, tenant_id: str) -> Tenant:
    tenant = await state.store.get_tenant(tenant_id) if _TENANT_ID.match(tenant_id) else None
    if tenant is None:
        raise NotFound("tenant", tenant_id)
    return tenant


@router.post(
    "/v1/tenants",
    status_code=201,
    response_model=TenantOut,
    responses=problems(409),
    summary="Create a tenant",
)
async def create_tenant(body: TenantIn, request: Request, principal: SystemAdmin) -> Any:
    """A limit left out takes the operator's default for new tenants (none unless
    ``cronwheel api --tenant-max-jobs/--tenant-max-creates-per-second`` set one); a
    limit sent as ``null``: no limit."""
    state = api_state(request)
    sent, defaults = body.model_fields_set, state.tenant_defaults
    tenant = Tenant(
        id=body.id,
        name=body.name,
        created_at=state.clock.now(),
        max_jobs=body.max_jobs if "max_jobs" in sent else defaults.max_jobs,
        max_creates_per_second=(
            body.max_creates_per_second
            if "max_creates_per_second" in sent
            else defaults.max_creates_per_second
        ),
        claim_weight=body.claim_weight,
        max_running=body.max_running,
    )
    await state.store.create_tenant(tenant, actor=principal.actor)
    headers = {"Location": f"/v1/tenants/{tenant.id}"}
    return JSONResponse(dump(TenantOut.of(tenant)), status_code=201, headers=headers)


@router.get(
    "/v1/tenants", response_model=Page[TenantOut], responses=problems(), summary="List tenants"
)
async def list_tenants(request: Request, principal: SystemAdmin) -> Any:
    tenants = await api_state(request).store.list_tenants()
    return {"items": [dump(TenantOut.of(t)) for t in tenants], "next_cursor": None}


@router.get(
    "/v1/tenants/{tenant_id}",
    response_model=TenantOut,
    responses=problems(404),
    summary="Read a tenant",
)
async def get_tenant(tenant_id: TenantPath, request: Request, principal: SystemAdmin) -> Any:
    return dump(TenantOut.of(await _tenant(api_state(request), tenant_id)))


@router.patch(
    "/v1/tenants/{tenant_id}",
    response_model=TenantOut,
    responses=problems(404),
    summary="Change a tenant's name or quotas",
)
async def update_tenant(
    tenant_id: TenantPath, body: TenantPatch, request: Request, principal: SystemAdmin
) -> Any:
    """Fields sent replace the tenant's; ``null`` removes a quota."""
    state = api_state(request)
    current = await _tenant(state, tenant_id)
    updated = await state.store.update_tenant(
        replace(current, **body.changes()), actor=principal.actor, now=state.clock.now()
    )
    state.quotas.forget(tenant_id)
    return dump(TenantOut.of(updated))


# -- keys --------------------------------------------------------------------------------------
def _scope(principal: Principal, tenant_id: str | None) -> str:
    """The tenant whose keys are managed: the caller's own unless a system admin names
    another (403 for anyone else)."""
    if tenant_id is None or tenant_id == principal.tenant_id:
        return principal.tenant_id
    if not principal.system_admin:
        raise ApiProblem(403, "only a system admin manages the keys of another tenant")
    return tenant_id


@router.post(
    "/v1/keys",
    status_code=201,
    response_model=NewKeyOut,
    responses=problems(404, 409),
    summary="Create an API key",
)
async def create_key(body: KeyIn, request: Request, principal: Admin) -> Any:
    """The answer is the only place the token ever appears: keep it."""
    state = api_state(request)
    key_id = new_id()
    token = new_token(key_id)
    key = ApiKey(
        id=key_id,
        tenant_id=_scope(principal, body.tenant_id),
        key_hash=hash_token(token),
        role=body.role,
        created_at=state.clock.now(),
        name=body.name,
    )
    await state.store.create_api_key(key, actor=principal.actor)
    out = NewKeyOut(
        id=key.id,
        token=token,
        tenant_id=key.tenant_id,
        role=key.role,
        name=key.name,
        created_at=key.created_at,
    )
    return JSONResponse(dump(out), status_code=201)


@router.get("/v1/keys", response_model=Page[KeyOut], responses=problems(), summary="List API keys")
async def list_keys(request: Request, principal: Admin, tenant_id: TenantQuery = None) -> Any:
    """A tenant's keys, revoked ones included; never their tokens."""
    keys = await api_state(request).store.list_api_keys(_scope(principal, tenant_id))
    return {"items": [dump(KeyOut.of(k)) for k in keys], "next_cursor": None}


@router.delete(
    "/v1/keys/{key_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404),
    summary="Revoke an API key",
)
async def revoke_key(key_id: KeyPath, request: Request, principal: Admin) -> Response:
    """Revoked at once: the next request with its token is a 401. A system admin may
    revoke any tenant's key by its id."""
    state = api_state(request)
    if not is_uuid(key_id):
        raise NotFound("key", key_id)
    for tenant_id in await _key_scopes(state, principal):
        try:
            await state.store.revoke_api_key(
                tenant_id, key_id, now=state.clock.now(), actor=principal.actor
            )
        except NotFound:
            continue
        return Response(status_code=204)
    raise NotFound("key", key_id)


async def _key_scopes(state: ApiState, principal: Principal) -> list[str]:
    """Where a key to revoke may be: the caller's tenant first, then (system admins)
    every other tenant."""
    if not principal.system_admin:
        return [principal.tenant_id]
    others = [t.id for t in await state.store.list_tenants() if t.id != principal.tenant_id]
    return [principal.tenant_id, *others]
