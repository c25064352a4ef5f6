"""Per-pool rate limits over HTTP (decision 0033): set by a system admin, read by any
key, applied to remote workers' claims, and named by ``why``."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, problem
from tests.api.test_workers import claim, immediate, worker_client


async def test_a_system_admin_sets_and_removes_a_rate_others_only_read(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    answer = await client.put("/v1/pool-rates/crm", json={"per_second": 10})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"items": [{"pool": "crm", "per_second": 10.0}]}
    problem(await client.put("/v1/pool-rates/crm", json={"per_second": 0}), 422, "per_second")
    problem(await client.put("/v1/pool-rates/crm", json={"per_second": "9"}), 422, "per_second")
    problem(await client.put("/v1/pool-rates/bad%20name", json={"per_second": 1}), 422)
    await new_tenant(client, "acme")
    key = await new_key(client, "admin", "acme")
    async with connect(app, key["token"]) as tenant_admin:
        assert (
            await tenant_admin.put("/v1/pool-rates/crm", json={"per_second": 99})
        ).status_code == 403
        listed = (await tenant_admin.get("/v1/pool-rates")).json()
        assert listed == {"items": [{"pool": "crm", "per_second": 10.0}]}
    removed = await client.put("/v1/pool-rates/crm", json={"per_second": None})
    assert removed.json() == {"items": []}


async def test_a_remote_claim_of_a_limited_pool_gets_what_its_bucket_grants(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    assert (await client.put("/v1/pool-rates/slow", json={"per_second": 2})).status_code == 200
    for _ in range(6):
        await immediate(client, pool="slow")
    await immediate(client, pool="fast")
    async with await worker_client(app, client) as worker:
        got = await claim(worker, pool="slow")
        assert len(got) == 2  # a full bucket: one second's worth
        assert await claim(worker, pool="slow") == []  # empty until it refills
        # Pools without a limit in the same claim are not held back.
        body = {"worker_id": "w2", "pools": ["slow", "fast"], "capacity": 10, "lease_seconds": 30}
        both = (await worker.post("/v1/workers/claim", json=body)).json()["runs"]
        assert [c["run"]["pool"] for c in both] == ["fast"]


async def test_why_names_the_pool_rate_of_a_waiting_run(client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/pool-rates/metered", json={"per_second": 0.5})).status_code == 200
    job_id = await immediate(client, pool="metered")
    run = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["items"][0]
    at = run["scheduled_for"]
    answer = (await client.get(f"/v1/jobs/{job_id}/why", params={"at": at})).json()
    assert any("the pool metered starts at most 0.5 runs a second" in line
               for line in answer["explanation"]), answer["explanation"]  # fmt: skip
