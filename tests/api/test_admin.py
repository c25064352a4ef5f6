"""Tenants, keys and health over HTTP, on both stores."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from cronwheel.store.base import Store
from cronwheel.web.auth import hash_token
from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, problem, spec


async def test_tenants_crud(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/tenants", json={"id": "acme", "name": "ACME", "max_jobs": 10})
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/tenants/acme"
    tenant = created.json()
    assert tenant["max_jobs"] == 10
    assert tenant["max_creates_per_second"] is None
    problem(await client.post("/v1/tenants", json={"id": "acme", "name": "again"}), 409, "id")
    problem(await client.post("/v1/tenants", json={"id": "no spaces", "name": "x"}), 422, "id")
    listed = (await client.get("/v1/tenants")).json()["items"]
    assert [t["id"] for t in listed] == ["acme", "default"]
    assert (await client.get("/v1/tenants/acme")).json() == tenant
    patched = await client.patch(
        "/v1/tenants/acme", json={"max_jobs": None, "max_creates_per_second": 2.5}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["max_jobs"] is None
    assert patched.json()["max_creates_per_second"] == 2.5
    assert patched.json()["name"] == "ACME"
    problem(await client.patch("/v1/tenants/acme", json={"name": None}), 422, "name")
    problem(await client.get("/v1/tenants/nobody"), 404)
    problem(await client.get("/v1/tenants/-bad-"), 404)
    problem(await client.patch("/v1/tenants/nobody", json={"name": "x"}), 404)


async def test_a_tenant_claim_weight_and_running_cap_are_admin_settings(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post("/v1/tenants", json={"id": "acme", "name": "ACME"})
    assert created.status_code == 201, created.text
    assert (created.json()["claim_weight"], created.json()["max_running"]) == (1.0, None)
    patched = await client.patch("/v1/tenants/acme", json={"claim_weight": 2.5, "max_running": 8})
    assert patched.status_code == 200, patched.text
    assert (patched.json()["claim_weight"], patched.json()["max_running"]) == (2.5, 8)
    again = (await client.get("/v1/tenants/acme")).json()
    assert (again["claim_weight"], again["max_running"]) == (2.5, 8)
    removed = await client.patch("/v1/tenants/acme", json={"max_running": None})
    assert removed.json()["max_running"] is None
    for bad in ({"claim_weight": 0}, {"claim_weight": 1001.0}, {"claim_weight": None}):
        problem(await client.patch("/v1/tenants/acme", json=bad), 422, "claim_weight")
    for bad_cap in ({"max_running": 0}, {"max_running": "3"}):
        problem(await client.patch("/v1/tenants/acme", json=bad_cap), 422, "max_running")
    refused = {"id": "x", "name": "x", "claim_weight": -1.0}
    problem(await client.post("/v1/tenants", json=refused), 422, "claim_weight")


async def test_keys_authenticate_until_revoked(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    key = await new_key(client, "write")
    assert key["token"].startswith(f"cw_{key['id']}_")
    assert key["tenant_id"] == "default"
    stored = await store.find_api_key(hash_token(key["token"]))
    assert stored is not None
    assert stored.key_hash != key["token"]
    async with connect(app, key["token"]) as writer:
        created = await writer.post("/v1/jobs", json=spec())
        assert created.status_code == 201
        job = (await client.get(f"/v1/jobs/{created.json()['id']}")).json()
        audit = await store.list_audit("default", job["id"])
        assert audit[0].actor == f"key:{key['id']}"
        listed = (await client.get("/v1/keys")).json()["items"]
        assert [(k["id"], k["role"], k["revoked_at"]) for k in listed] == [
            (key["id"], "write", None)
        ]
        assert "token" not in listed[0]
        revoked = await client.delete(f"/v1/keys/{key['id']}")
        assert revoked.status_code == 204
        assert revoked.content == b""
        problem(await writer.get("/v1/jobs"), 401)
    assert (await client.get("/v1/keys")).json()["items"][0]["revoked_at"] is not None
    problem(await client.delete("/v1/keys/01890000-0000-7000-8000-000000000000"), 404)
    problem(await client.delete("/v1/keys/whatever"), 404)


async def test_system_admins_manage_other_tenants_keys(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "acme")
    tenant_admin = await new_key(client, "admin", "acme")
    assert tenant_admin["tenant_id"] == "acme"
    problem(await client.post("/v1/keys", json={"role": "read", "tenant_id": "nobody"}), 404)
    problem(await client.post("/v1/keys", json={"role": "root"}), 422, "role")
    async with connect(app, tenant_admin["token"]) as acme:
        reader = await new_key(acme, "read")
        assert reader["tenant_id"] == "acme"
        problem(await acme.post("/v1/keys", json={"role": "read", "tenant_id": "default"}), 403)
        problem(await acme.get("/v1/keys", params={"tenant_id": "default"}), 403)
        problem(await acme.get("/v1/tenants"), 403)
        mine = (await acme.get("/v1/keys")).json()["items"]
        assert {k["id"] for k in mine} == {tenant_admin["id"], reader["id"]}
        theirs = (await client.get("/v1/keys", params={"tenant_id": "acme"})).json()["items"]
        assert {k["id"] for k in theirs} == {tenant_admin["id"], reader["id"]}
        default_key = await new_key(client, "read")
        problem(await acme.delete(f"/v1/keys/{default_key['id']}"), 404)
    assert (await client.delete(f"/v1/keys/{reader['id']}")).status_code == 204


async def test_health(app: FastAPI) -> None:
    async with connect(app) as anonymous:
        assert (await anonymous.get("/healthz")).json() == {"status": "ok"}
        assert (await anonymous.get("/readyz")).json() == {"status": "ready"}
        schema = (await anonymous.get("/openapi.json")).json()
        assert "/v1/jobs" in schema["paths"]


async def test_readyz_is_503_when_the_store_is_gone(app: FastAPI, store: Store) -> None:
    await store.close()
    async with connect(app) as anonymous:
        problem(await anonymous.get("/readyz"), 503)
        assert (await anonymous.get("/healthz")).status_code == 200
