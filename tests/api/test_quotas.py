"""Tenant quotas: live jobs and creates per second, answered with 429 and Retry-After."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.errors import StoreUnavailable
from cronwheel.store.base import Store
from cronwheel.web.quotas import TenantDefaults
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, problem, spec


async def writer_of(app: FastAPI, admin: httpx.AsyncClient, tenant: str, **quotas: float) -> str:
    await new_tenant(admin, tenant, **quotas)
    token: str = (await new_key(admin, "write", tenant))["token"]
    return token


async def test_max_jobs(app: FastAPI, client: httpx.AsyncClient) -> None:
    token = await writer_of(app, client, "small", max_jobs=2)
    async with connect(app, token) as writer:
        first = (await writer.post("/v1/jobs", json=spec())).json()
        assert (await writer.post("/v1/jobs", json=spec())).status_code == 201
        full = problem(await writer.post("/v1/jobs", json=spec()), 429, "max_jobs")
        assert "quota" in full["type"]
        response = await writer.post("/v1/jobs/batch", json={"jobs": [spec()]})
        problem(response, 429)
        assert int(response.headers["retry-after"]) >= 1
        # a cancelled job is no longer live: room for one more
        await writer.delete(f"/v1/jobs/{first['id']}")
        assert (await writer.post("/v1/jobs", json=spec())).status_code == 201
        # an immediate job completes at once, so it never counts
        now = spec(schedule={"kind": "immediate"})
        problem(await writer.post("/v1/jobs", json=now), 429)


async def test_max_creates_per_second(app: FastAPI, client: httpx.AsyncClient) -> None:
    token = await writer_of(app, client, "slow", max_creates_per_second=1)
    async with connect(app, token) as writer:
        assert (await writer.post("/v1/jobs", json=spec())).status_code == 201
        response = await writer.post("/v1/jobs", json=spec())
        problem(response, 429, "max_creates_per_second")
        assert int(response.headers["retry-after"]) >= 1
    # another tenant has its own budget
    assert (await client.post("/v1/jobs", json=spec())).status_code == 201


async def test_a_batch_larger_than_the_rate_leaves_the_bucket_in_debt(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    token = await writer_of(app, client, "bulk", max_creates_per_second=2)
    async with connect(app, token) as writer:
        batch = {"jobs": [spec() for _ in range(6)]}
        assert (await writer.post("/v1/jobs/batch", json=batch)).status_code == 201
        response = await writer.post("/v1/jobs", json=spec())
        problem(response, 429)
        assert int(response.headers["retry-after"]) >= 2


async def test_store_down_is_503(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("connection refused")

    monkeypatch.setattr(store, "list_jobs", down)
    response = await client.get("/v1/jobs")
    problem(response, 503)
    assert response.headers["retry-after"] == "1"


async def test_trigger_and_replay_count_against_the_create_rate(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    # Issue 17, defect 6: trigger created runs past max_creates_per_second. At 0.01 per
    # second, the job's own creation spends the budget for the next 100 s.
    token = await writer_of(app, client, "trickle", max_creates_per_second=0.01)
    async with connect(app, token) as writer:
        job = (await writer.post("/v1/jobs", json=spec())).json()
        problem(await writer.post(f"/v1/jobs/{job['id']}/trigger"), 429)
        assert (await writer.get(f"/v1/jobs/{job['id']}/runs")).json()["items"] == []
        problem(await writer.post("/v1/runs/1/replay"), 429)
        problem(await writer.post("/v1/dead-letter/replay", json={"run_ids": [1, 2]}), 429)


async def test_the_rate_holds_across_two_apps_on_one_store(
    app: FastAPI, client: httpx.AsyncClient, store2: Store
) -> None:
    # Issue 17, defect 6: each API process kept its own bucket, so two allowed twice the
    # rate. A second app on its own connection to the same database is another process.
    token = await writer_of(app, client, "shared", max_creates_per_second=0.01)
    other = create_app(store2, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    async with connect(app, token) as first, connect(other, token) as second:
        assert (await first.post("/v1/jobs", json=spec())).status_code == 201
        problem(await second.post("/v1/jobs", json=spec()), 429, "max_creates_per_second")
        response = await second.post("/v1/jobs/batch", json={"jobs": [spec()]})
        problem(response, 429, "max_creates_per_second")


async def test_a_refused_batch_writes_nothing(app: FastAPI, client: httpx.AsyncClient) -> None:
    token = await writer_of(app, client, "tight", max_jobs=3)
    async with connect(app, token) as writer:
        assert (await writer.post("/v1/jobs", json=spec())).status_code == 201
        batch = {"jobs": [spec() for _ in range(3)]}
        problem(await writer.post("/v1/jobs/batch", json=batch), 429, "max_jobs")
        assert len((await writer.get("/v1/jobs")).json()["items"]) == 1


async def test_a_new_tenant_takes_the_operators_defaults_unless_it_names_its_limits(
    store: Store,
) -> None:
    defaults = TenantDefaults(max_jobs=5, max_creates_per_second=2.5)
    app = create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), tenant_defaults=defaults)
    async with connect(app, ADMIN_TOKEN) as admin:
        await new_tenant(admin, "plain")
        await new_tenant(admin, "own", max_jobs=7, max_creates_per_second=None)
        plain = (await admin.get("/v1/tenants/plain")).json()
        own = (await admin.get("/v1/tenants/own")).json()
    assert (plain["max_jobs"], plain["max_creates_per_second"]) == (5, 2.5)
    assert (own["max_jobs"], own["max_creates_per_second"]) == (7, None)
