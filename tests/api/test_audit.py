"""``GET /v1/audit``: every change to jobs, runs, pipelines, tenants and keys, newest
first, for admins only; on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from fastapi import FastAPI

from cronwheel.sdk import AsyncClient
from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, problem, spec


async def test_changes_to_jobs_tenants_and_keys_are_listed_newest_first(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "acme")
    key = await new_key(client, "admin", "acme")
    async with connect(app, key["token"]) as acme:
        job = (await acme.post("/v1/jobs", json=spec("nightly"))).json()
        assert (await acme.post(f"/v1/jobs/{job['id']}/pause")).status_code == 200
        writer = await new_key(acme, "write")
        assert (await acme.delete(f"/v1/keys/{writer['id']}")).status_code == 204
        page = (await acme.get("/v1/audit")).json()
    actor = f"key:{key['id']}"
    assert [(e["entity"], e["action"], e["actor"]) for e in page["items"]] == [
        ("key", "revoked", actor),
        ("key", "created", actor),
        ("job", "paused", actor),
        ("job", "created", actor),
        ("key", "created", "admin-token"),
        ("tenant", "created", "admin-token"),
    ]
    assert {e["tenant_id"] for e in page["items"]} == {"acme"}
    assert page["items"][1]["details"] == {"role": "write", "name": "write key"}
    assert page["next_cursor"] is None
    assert key["token"] not in str(page) and writer["token"] not in str(page)
    assert "hash" not in str(page)


async def test_only_admins_read_it_and_only_their_tenants(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "acme")
    await new_tenant(client, "other")
    admin = await new_key(client, "admin", "acme")
    for role in ("read", "write", "worker"):
        someone = await new_key(client, role, "acme")
        async with connect(app, someone["token"]) as them:
            problem(await them.get("/v1/audit"), 403)
    async with connect(app, admin["token"]) as acme:
        problem(await acme.get("/v1/audit", params={"tenant": "other"}), 403)
        own = (await acme.get("/v1/audit", params={"tenant": "acme"})).json()["items"]
    assert own and {e["tenant_id"] for e in own} == {"acme"}
    # A system admin reads every tenant's, or one's.
    everything = (await client.get("/v1/audit")).json()["items"]
    assert {"acme", "other"} <= {e["tenant_id"] for e in everything}
    other = (await client.get("/v1/audit", params={"tenant": "other"})).json()["items"]
    assert {e["tenant_id"] for e in other} == {"other"}
    acting = await client.get("/v1/audit", headers={"Cronwheel-Tenant": "other"})
    assert {e["tenant_id"] for e in acting.json()["items"]} == {"other"}


async def test_filters_and_keyset_pages(client: httpx.AsyncClient) -> None:
    for name in ("a", "b", "c"):
        assert (await client.post("/v1/jobs", json=spec(name))).status_code == 201
    await new_tenant(client, "acme")
    jobs = (await client.get("/v1/audit", params={"entity": "job", "limit": 2})).json()
    assert [e["entity"] for e in jobs["items"]] == ["job", "job"]
    assert jobs["next_cursor"] is not None
    rest = await client.get(
        "/v1/audit", params={"entity": "job", "limit": 2, "cursor": jobs["next_cursor"]}
    )
    assert len(rest.json()["items"]) == 1 and rest.json()["next_cursor"] is None
    ids = [e["id"] for e in jobs["items"] + rest.json()["items"]]
    assert ids == sorted(ids, reverse=True)
    by_actor = (await client.get("/v1/audit", params={"actor": "admin-token"})).json()["items"]
    assert len(by_actor) == 4
    assert (await client.get("/v1/audit", params={"actor": "nobody"})).json()["items"] == []
    now = datetime.now(UTC)
    later = {"since": (now + timedelta(hours=1)).isoformat()}
    assert (await client.get("/v1/audit", params=later)).json()["items"] == []
    window = {"since": (now - timedelta(hours=1)).isoformat(), "until": now.isoformat()}
    assert len((await client.get("/v1/audit", params=window)).json()["items"]) == 4


async def test_bad_filters_are_422_naming_the_field(client: httpx.AsyncClient) -> None:
    problem(await client.get("/v1/audit", params={"entity": "worker"}), 422, "entity")
    problem(await client.get("/v1/audit", params={"since": "yesterday"}), 422, "since")
    problem(await client.get("/v1/audit", params={"since": "2026-01-01T00:00:00"}), 422, "since")
    same = "2026-01-01T00:00:00+00:00"
    problem(await client.get("/v1/audit", params={"since": same, "until": same}), 422, "until")
    problem(await client.get("/v1/audit", params={"cursor": "bm9wZQ"}), 422, "cursor")
    problem(await client.get("/v1/audit", params={"limit": 0}), 422, "limit")


async def test_the_sdk_reads_it(app: FastAPI, client: httpx.AsyncClient) -> None:
    await new_tenant(client, "acme")
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://test", "test-admin-token-0123456789", transport=transport) as cw:
        page = await cw.audit(entity="tenant", since=datetime.now(UTC) - timedelta(hours=1))
    [entry] = page.items
    assert (entry.entity, entry.entity_id, entry.action) == ("tenant", "acme", "created")
