"""The auth matrix: every role, every endpoint, own or other tenant: the status it gets.

Another tenant's ids answer 404, exactly like ids that do not exist; a missing, unknown
or revoked token is a 401; a role that may not make the call is a 403 (decided before
anything is looked up, so a 403 reveals nothing either).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.control.pipelines import PipelineService
from cronwheel.control.service import JobService
from cronwheel.core.model import ApiKey, AttemptOutcome, Role, RunState, new_id
from cronwheel.store.base import Completion, Store
from cronwheel.web.auth import hash_token
from tests.api import helpers
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, problem, spec

OTHER = "acme"
_ids = itertools.count()


@dataclass(frozen=True)
class Caller:
    """One row of the matrix: who calls, and as whom the API should see them."""

    role: str | None
    tenant: str = OTHER

    @property
    def system_admin(self) -> bool:
        return self.role == "admin" and self.tenant == "default"


CALLERS = {
    "admin-token": Caller("admin", "default"),
    "system-admin": Caller("admin", "default"),
    "tenant-admin": Caller("admin"),
    "write": Caller("write"),
    "read": Caller("read"),
    "worker": Caller("worker"),
    "no-token": Caller(None),
    "unknown-token": Caller(None),
    "revoked-token": Caller(None),
}

# Which roles each kind of call needs, written out here rather than read from the code.
MAY = {
    "read": {"read", "write", "admin"},
    "write": {"write", "admin"},
    "work": {"worker", "admin"},
    "see-workers": {"read", "write", "worker", "admin"},
    "admin": {"admin"},
}


class World:
    """Fresh resources on demand, made straight through the store (not under test)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.jobs = JobService(store, actor="test")

    async def job(self, tenant: str, **changes: Any) -> str:
        return (await self.jobs.create(tenant_id=tenant, **spec(**changes))).id

    async def manual_job(self, tenant: str) -> str:
        return await self.job(tenant, schedule={"kind": "manual"})

    async def paused_job(self, tenant: str) -> str:
        job_id = await self.job(tenant)
        await self.jobs.pause(job_id, tenant_id=tenant)
        return job_id

    async def run(self, tenant: str) -> str:
        run = await self.jobs.trigger(await self.job(tenant), tenant_id=tenant)
        return str(run.id)

    async def running(self, tenant: str) -> tuple[int, int]:
        """A run held by ``<tenant>/w`` (its own pool, so no other run is claimed)."""
        pool = f"p{next(_ids)}"
        await self.jobs.trigger(await self.job(tenant, pool=pool), tenant_id=tenant)
        now = datetime.now(UTC)
        [claimed] = await self.store.claim_runs(
            f"{tenant}/w", [pool], limit=1, now=now, prefetch_until=now, lease_seconds=60
        )
        return claimed.run.id, claimed.run.fence

    async def dead_run(self, tenant: str) -> str:
        run_id, fence = await self.running(tenant)
        now = datetime.now(UTC)
        done = Completion(
            run_id, fence, f"{tenant}/w", RunState.DEAD, AttemptOutcome.FAILED, now, now
        )
        assert await self.store.complete_runs([done]) == [run_id]
        return str(run_id)

    async def pipeline(self, tenant: str) -> str:
        body = helpers.pipeline()
        name = body.pop("name")
        made = await PipelineService(self.store, actor="test").create(name, body, tenant_id=tenant)
        return made.id

    async def key(self, tenant: str) -> str:
        key_id = new_id()
        now = datetime.now(UTC)
        await self.store.create_api_key(
            ApiKey(key_id, tenant, hash_token(f"cw_{key_id}_x"), Role.READ, now)
        )
        return key_id


Factory = Callable[[World, str], Awaitable[Any]]


async def _nothing(world: World, tenant: str) -> Any:
    return None


@dataclass(frozen=True)
class Call:
    """One endpoint, called on a fresh resource of the tenant in scope."""

    label: str
    method: str
    path: str
    needs: str | None  # "read", "write", "work", "see-workers", "admin", "system" or None
    ok: int
    make: Factory = _nothing
    body: Callable[[Any, str], Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    scoped: bool = True
    other: Callable[[Caller], int] = lambda caller: 404

    async def send(self, client: httpx.AsyncClient, world: World, tenant: str) -> httpx.Response:
        made = await self.make(world, tenant)
        made = made if isinstance(made, tuple) else (made,)
        body = None if self.body is None else self.body(made, tenant)
        return await client.request(
            self.method, self.path.format(*made), json=body, headers=self.headers
        )


def _tenant_id(made: Any, tenant: str) -> Any:
    return {"id": f"t{next(_ids)}", "name": "new"}


CALLS = [
    Call("healthz", "GET", "/healthz", None, 200, scoped=False),
    Call("readyz", "GET", "/readyz", None, 200, scoped=False),
    Call("create job", "POST", "/v1/jobs", "write", 201, body=lambda m, t: spec(), scoped=False),
    Call(
        "create batch",
        "POST",
        "/v1/jobs/batch",
        "write",
        201,
        body=lambda m, t: {"jobs": [spec(), spec()]},
        scoped=False,
    ),
    Call("list jobs", "GET", "/v1/jobs", "read", 200, scoped=False),
    Call("get job", "GET", "/v1/jobs/{}", "read", 200, World.job),
    Call(
        "patch job",
        "PATCH",
        "/v1/jobs/{}",
        "write",
        200,
        World.job,
        body=lambda m, t: {"payload": 1},
        headers={"If-Match": "1"},
    ),
    Call("cancel job", "DELETE", "/v1/jobs/{}", "write", 200, World.job),
    Call("pause job", "POST", "/v1/jobs/{}/pause", "write", 200, World.job),
    Call("resume job", "POST", "/v1/jobs/{}/resume", "write", 200, World.paused_job),
    Call("trigger job", "POST", "/v1/jobs/{}/trigger", "write", 201, World.job),
    Call(
        "enqueue runs",
        "POST",
        "/v1/jobs/{}/runs",
        "write",
        201,
        World.manual_job,
        body=lambda m, t: {"payloads": [{"n": 1}, None]},
    ),
    Call("job runs", "GET", "/v1/jobs/{}/runs", "read", 200, World.job),
    Call(
        "preview schedule",
        "POST",
        "/v1/schedules/preview",
        "read",
        200,
        body=lambda m, t: {"schedule": {"kind": "cron", "cron": "0 9 * * *"}},
        scoped=False,
    ),
    Call(
        "create pipeline",
        "POST",
        "/v1/pipelines",
        "write",
        201,
        body=lambda m, t: helpers.pipeline(),
        scoped=False,
    ),
    Call("list pipelines", "GET", "/v1/pipelines", "read", 200, scoped=False),
    Call("get pipeline", "GET", "/v1/pipelines/{}", "read", 200, World.pipeline),
    Call(
        "get pipeline version",
        "GET",
        "/v1/pipelines/{}?version=1",
        "read",
        200,
        World.pipeline,
    ),
    Call(
        "put pipeline",
        "PUT",
        "/v1/pipelines/{}",
        "write",
        200,
        World.pipeline,
        body=lambda m, t: (
            {k: v for k, v in helpers.pipeline().items() if k != "name"}
            | {"failure_policy": "continue"}
        ),
        headers={"If-Match": "1"},
    ),
    Call("delete pipeline", "DELETE", "/v1/pipelines/{}", "write", 200, World.pipeline),
    Call("pipeline versions", "GET", "/v1/pipelines/{}/versions", "read", 200, World.pipeline),
    Call("get run", "GET", "/v1/runs/{}", "read", 200, World.run),
    Call("cancel run", "POST", "/v1/runs/{}/cancel", "write", 200, World.run),
    Call("replay run", "POST", "/v1/runs/{}/replay", "write", 200, World.dead_run),
    Call("dead letter", "GET", "/v1/dead-letter", "read", 200, scoped=False),
    Call(
        "replay dead",
        "POST",
        "/v1/dead-letter/replay",
        "write",
        200,
        World.dead_run,
        body=lambda m, t: {"run_ids": [int(m[0])]},
        other=lambda caller: 200,  # another tenant's run ids are simply not replayed
    ),
    Call("notifications", "GET", "/v1/notifications", "read", 200, scoped=False),
    # Another tenant's ids are simply not replayed (tests/store/test_notifications.py).
    Call(
        "replay notifications",
        "POST",
        "/v1/notifications/replay",
        "write",
        200,
        body=lambda m, t: {"ids": [1]},
        scoped=False,
    ),
    # A claim is scoped to the caller's tenant by the store: see test_workers.py.
    Call(
        "claim",
        "POST",
        "/v1/workers/claim",
        "work",
        200,
        body=lambda m, t: {"worker_id": "w", "pools": ["none"]},
        scoped=False,
    ),
    Call(
        "heartbeat",
        "POST",
        "/v1/workers/heartbeat",
        "work",
        200,
        body=lambda m, t: {"worker_id": "w", "leases": []},
        scoped=False,
    ),
    Call(
        "complete (stale fence)",
        "POST",
        "/v1/runs/{}/complete",
        "work",
        409,
        World.running,
        body=lambda m, t: {"worker_id": "w", "fence": m[1] + 1, "outcome": "succeeded"},
    ),
    Call("list workers", "GET", "/v1/workers", "see-workers", 200, scoped=False),
    Call("create tenant", "POST", "/v1/tenants", "system", 201, body=_tenant_id, scoped=False),
    Call("list tenants", "GET", "/v1/tenants", "system", 200, scoped=False),
    Call("get tenant", "GET", f"/v1/tenants/{OTHER}", "system", 200, scoped=False),
    Call(
        "patch tenant",
        "PATCH",
        f"/v1/tenants/{OTHER}",
        "system",
        200,
        body=lambda m, t: {"name": "renamed"},
        scoped=False,
    ),
    Call(
        "create key",
        "POST",
        "/v1/keys",
        "admin",
        201,
        body=lambda m, t: {"role": "read", "tenant_id": t},
        other=lambda caller: 201 if caller.system_admin else 403,
    ),
    Call(
        "list keys",
        "GET",
        "/v1/keys?tenant_id={}",
        "admin",
        200,
        lambda world, tenant: _just(tenant),
        other=lambda caller: 200 if caller.system_admin else 403,
    ),
    Call(
        "revoke key",
        "DELETE",
        "/v1/keys/{}",
        "admin",
        204,
        World.key,
        other=lambda caller: 204 if caller.system_admin else 404,
    ),
]


async def _just(value: Any) -> Any:
    return value


def expected(caller: Caller, call: Call, scope: str) -> int:
    if call.needs is None:
        return call.ok
    if caller.role is None:
        return 401
    allowed = caller.system_admin if call.needs == "system" else caller.role in MAY[call.needs]
    if not allowed:
        return 403
    return call.other(caller) if scope == "other" else call.ok


async def tokens(admin: httpx.AsyncClient) -> dict[str, str | None]:
    await new_tenant(admin, OTHER)
    revoked = await new_key(admin, "write", OTHER)
    assert (await admin.delete(f"/v1/keys/{revoked['id']}")).status_code == 204
    found: dict[str, str | None] = {
        "admin-token": ADMIN_TOKEN,
        "system-admin": (await new_key(admin, "admin"))["token"],
        "no-token": None,
        "unknown-token": f"cw_{new_id()}_not-a-real-secret-at-all",
        "revoked-token": revoked["token"],
    }
    for name in ("tenant-admin", "write", "read", "worker"):
        role = CALLERS[name].role
        assert role is not None
        found[name] = (await new_key(admin, role, OTHER))["token"]
    return found


@pytest.mark.parametrize("who", list(CALLERS))
async def test_auth_matrix(who: str, app: FastAPI, client: httpx.AsyncClient, store: Store) -> None:
    caller = CALLERS[who]
    token = (await tokens(client))[who]
    world = World(store)
    own = caller.tenant
    other = OTHER if own == "default" else "default"
    wrong: list[str] = []
    async with connect(app, token) as as_caller:
        for call in CALLS:
            for scope, tenant in [("own", own), ("other", other)][: 2 if call.scoped else 1]:
                response = await call.send(as_caller, world, tenant)
                want = expected(caller, call, scope)
                if response.status_code != want:
                    wrong.append(
                        f"{call.label} [{scope}]: expected {want}, got {response.status_code}"
                        f" {response.text[:200]}"
                    )
                elif want >= 400:
                    assert response.headers["content-type"] == "application/problem+json"
                if want == 401:
                    assert response.headers["www-authenticate"] == "Bearer"
    assert not wrong, "\n".join(wrong)


async def test_lists_never_show_another_tenants_items(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    found = await tokens(client)
    world = World(store)
    mine = await world.job(OTHER)
    theirs = await world.job("default")
    await world.dead_run(OTHER)
    their_dead = await world.dead_run("default")
    async with connect(app, found["read"]) as reader:
        my_pipeline = await world.pipeline(OTHER)
        their_pipeline = await world.pipeline("default")
        pipelines = (await reader.get("/v1/pipelines")).json()["items"]
        assert {p["id"] for p in pipelines} == {my_pipeline}
        assert their_pipeline not in {p["id"] for p in pipelines}
        jobs = (await reader.get("/v1/jobs")).json()["items"]
        assert mine in {j["id"] for j in jobs}
        assert theirs not in {j["id"] for j in jobs}
        assert {j["tenant_id"] for j in jobs} == {OTHER}
        dead = (await reader.get("/v1/dead-letter")).json()["items"]
        assert {r["tenant_id"] for r in dead} == {OTHER}
        assert int(their_dead) not in {r["id"] for r in dead}
    async with connect(app, found["write"]) as writer:
        replay = await writer.post("/v1/dead-letter/replay", json={"run_ids": [int(their_dead)]})
        assert replay.json() == {"replayed": []}
    async with connect(app, found["tenant-admin"]) as tenant_admin:
        keys = (await tenant_admin.get("/v1/keys")).json()["items"]
        assert {k["tenant_id"] for k in keys} == {OTHER}


@pytest.mark.parametrize("who", list(CALLERS))
async def test_only_a_system_admin_acts_for_another_tenant(
    who: str, app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    """``Cronwheel-Tenant: <tenant>``: a system admin works in that tenant as its admin
    would; anyone else naming another tenant than its own gets a 403, before anything
    is looked up."""
    caller = CALLERS[who]
    token = (await tokens(client))[who]
    world = World(store)
    theirs, own_job = await world.job(OTHER), await world.job("default")
    for_other = {"Cronwheel-Tenant": OTHER}
    async with connect(app, token) as as_caller:
        listed = await as_caller.get("/v1/jobs", headers=for_other)
        if caller.role is None:
            assert listed.status_code == 401
            return
        if not caller.system_admin:
            assert caller.tenant == OTHER  # the header names its own tenant: harmless
            assert listed.status_code == (200 if caller.role in MAY["read"] else 403)
            refused = await as_caller.get("/v1/jobs", headers={"Cronwheel-Tenant": "default"})
            body = problem(refused, 403)
            assert "system admin" in body["detail"] and "Cronwheel-Tenant" in body["detail"]
            return
        assert listed.status_code == 200, listed.text
        assert {j["id"] for j in listed.json()["items"]} == {theirs}
        assert (await as_caller.get(f"/v1/jobs/{theirs}", headers=for_other)).status_code == 200
        problem(await as_caller.get(f"/v1/jobs/{own_job}", headers=for_other), 404)
        created = await as_caller.post("/v1/jobs", json=spec(), headers=for_other)
        assert created.status_code == 201 and created.json()["tenant_id"] == OTHER
        key = await as_caller.post("/v1/keys", json={"role": "read"}, headers=for_other)
        assert key.status_code == 201 and key.json()["tenant_id"] == OTHER
        # Still a system admin while acting for a tenant: it may list tenants.
        assert (await as_caller.get("/v1/tenants", headers=for_other)).status_code == 200
        for unknown in ("nobody", "not a tenant"):
            missing = await as_caller.get("/v1/jobs", headers={"Cronwheel-Tenant": unknown})
            problem(missing, 422, "Cronwheel-Tenant")
