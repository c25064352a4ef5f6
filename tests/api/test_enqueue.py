"""``POST /v1/jobs/{job_id}/runs``: runs enqueued to a manual job, each with its own
payload, on both stores."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from cronwheel.api.app import MAX_BODY
from cronwheel.control.service import JobService
from cronwheel.store.base import Store
from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, problem, spec
from tests.api.test_workers import claim, worker_client

MANUAL = {"kind": "manual"}
UNKNOWN_JOB = "01a1ff91-f97e-7000-8a6d-746a4710197a"


async def manual_job(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=spec(schedule=MANUAL, **changes))
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    assert (job["state"], job["next_fire_at"]) == ("active", None)
    return job


async def enqueue(client: httpx.AsyncClient, job_id: str, *payloads: Any) -> httpx.Response:
    return await client.post(f"/v1/jobs/{job_id}/runs", json={"payloads": list(payloads)})


async def runs_of(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/jobs/{job_id}/runs", params={"limit": 1000})
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def test_runs_are_created_in_order_with_their_payloads(client: httpx.AsyncClient) -> None:
    job = await manual_job(client, payload={"from": "job"})
    payloads = [{"n": 1}, None, [1, "two"], "three", 4]
    response = await enqueue(client, job["id"], *payloads)
    assert response.status_code == 201, response.text
    run_ids = response.json()["run_ids"]
    assert response.json() == {"run_ids": run_ids}
    assert len(run_ids) == len(payloads) == len(set(run_ids))
    for run_id, payload in zip(run_ids, payloads, strict=True):
        run = (await client.get(f"/v1/runs/{run_id}")).json()
        assert (run["job_id"], run["state"], run["payload"]) == (job["id"], "pending", payload)
        assert run["attempts"] == []
    # newest first; a run's own payload is shown, null when it takes the job's
    listed = await runs_of(client, job["id"])
    assert [(r["id"], r["payload"]) for r in reversed(listed)] == list(
        zip(run_ids, payloads, strict=True)
    )
    assert len({r["idempotency_key"] for r in listed}) == len(payloads)
    again = (await enqueue(client, job["id"], {"n": 6})).json()["run_ids"]
    assert again[0] > max(run_ids)
    # the job itself is untouched: still active, never fires by itself
    after = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert (after["state"], after["version"], after["next_fire_at"]) == ("active", 1, None)


async def test_a_remote_worker_gets_each_runs_own_payload(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    job = await manual_job(client, pool="queue", payload={"from": "job"})
    run_ids = (await enqueue(client, job["id"], {"n": 1}, None)).json()["run_ids"]
    async with await worker_client(app, client) as worker:
        claimed = await claim(worker, pool="queue")
    got = {c["run"]["id"]: (c["payload"], c["run"]["payload"]) for c in claimed}
    assert got == {run_ids[0]: ({"n": 1}, {"n": 1}), run_ids[1]: ({"from": "job"}, None)}


async def test_a_body_over_the_single_request_limit_is_accepted(
    client: httpx.AsyncClient,
) -> None:
    job = await manual_job(client)
    payloads = [f"{i}" + "x" * 200_000 for i in range(8)]
    assert sum(map(len, payloads)) > MAX_BODY  # the batch limit, not the default, applies
    response = await enqueue(client, job["id"], *payloads)
    assert response.status_code == 201, response.text
    run_ids = response.json()["run_ids"]
    last = (await client.get(f"/v1/runs/{run_ids[-1]}")).json()
    assert last["payload"] == payloads[-1]


async def test_an_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    body = problem(await enqueue(client, UNKNOWN_JOB, 1), 404)
    assert UNKNOWN_JOB in body["detail"]
    problem(await enqueue(client, "not-a-job-id", 1), 404)


async def test_a_job_that_is_not_manual_is_409(client: httpx.AsyncClient) -> None:
    cron = (await client.post("/v1/jobs", json=spec())).json()
    body = problem(await enqueue(client, cron["id"], {"n": 1}), 409, "schedule")
    assert "manual" in body["detail"]
    assert body["errors"][0]["field"] == "schedule"
    assert await runs_of(client, cron["id"]) == []


async def test_a_paused_or_cancelled_manual_job_is_409(client: httpx.AsyncClient) -> None:
    job = await manual_job(client)
    assert (await client.post(f"/v1/jobs/{job['id']}/pause")).status_code == 200
    body = problem(await enqueue(client, job["id"], 1, 2), 409, "state")
    assert "paused" in body["detail"]
    assert await runs_of(client, job["id"]) == []
    assert (await client.post(f"/v1/jobs/{job['id']}/resume")).status_code == 200
    assert (await enqueue(client, job["id"], 1)).status_code == 201
    assert (await client.delete(f"/v1/jobs/{job['id']}")).status_code == 200
    problem(await enqueue(client, job["id"], 1), 409, "state")


async def test_payloads_are_checked_before_anything_is_enqueued(
    client: httpx.AsyncClient,
) -> None:
    job = await manual_job(client)
    url = f"/v1/jobs/{job['id']}/runs"
    empty = problem(await client.post(url, json={"payloads": []}), 422, "payloads")
    assert empty["detail"].startswith("payloads: ")
    problem(await client.post(url, json={}), 422, "payloads")
    problem(await client.post(url, json={"payloads": {"n": 1}}), 422, "payloads")
    problem(await client.post(url, json={"payloads": [1], "extra": 1}), 422, "extra")
    problem(await client.post(url, json={"payloads": ["a\u0000b"]}), 422, "payloads.0")
    big = problem(await client.post(url, json={"payloads": [1, "x" * 262_200]}), 413, "payloads.1")
    assert "256 KiB" in big["detail"]
    many = problem(await client.post(url, json={"payloads": [None] * 10_001}), 413, "payloads")
    assert "10000" in many["detail"]
    assert await runs_of(client, job["id"]) == []


async def test_a_retried_enqueue_replays_the_first_answer(client: httpx.AsyncClient) -> None:
    job = await manual_job(client)
    url = f"/v1/jobs/{job['id']}/runs"
    headers = {"Idempotency-Key": "enqueue-1"}
    body = {"payloads": [{"a": 1, "b": 2}, None]}
    first = await client.post(url, json=body, headers=headers)
    assert first.status_code == 201, first.text
    reordered = {"payloads": [{"b": 2, "a": 1}, None]}
    again = await client.post(url, json=reordered, headers=headers)
    assert (again.status_code, again.json()) == (201, first.json())
    assert len(await runs_of(client, job["id"])) == 2
    other = await client.post(url, json={"payloads": [3]}, headers=headers)
    problem(other, 409, "Idempotency-Key")
    assert len(await runs_of(client, job["id"])) == 2
    # without a key, the same request is another batch of runs
    assert (await client.post(url, json=body)).status_code == 201
    assert len(await runs_of(client, job["id"])) == 4


async def test_runs_take_creates_per_second_but_not_max_jobs(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    # One create a thousand seconds: the bucket holds one token, and a larger enqueue
    # leaves it deep in debt, so the 429 below cannot be refilled away by a slow test.
    await new_tenant(client, "queued", max_jobs=1, max_creates_per_second=0.001)
    token = (await new_key(client, "write", "queued"))["token"]
    job = await JobService(store).create(tenant_id="queued", **spec(schedule=MANUAL))
    async with connect(app, token) as writer:
        # the tenant is at max_jobs: enqueued runs are not jobs
        first = await enqueue(writer, job.id, 1, 2, 3)
        assert first.status_code == 201, first.text
        response = await enqueue(writer, job.id, 4)
        body = problem(response, 429)
        assert "max_creates_per_second" in body["detail"]
        assert int(response.headers["retry-after"]) >= 1
        # one budget for jobs and runs
        problem(await writer.post("/v1/jobs", json=spec()), 429)
        assert len(await runs_of(writer, job.id)) == 3
    # another tenant has its own budget
    mine = await manual_job(client)
    assert (await enqueue(client, mine["id"], 1)).status_code == 201


async def test_a_reader_may_not_enqueue(app: FastAPI, client: httpx.AsyncClient) -> None:
    job = await manual_job(client)
    token = (await new_key(client, "read"))["token"]
    async with connect(app, token) as reader:
        body = problem(await enqueue(reader, job["id"], 1), 403)
        assert "write" in body["detail"]
    assert await runs_of(client, job["id"]) == []


async def test_the_route_is_documented(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/jobs/{job_id}/runs"]["post"]
    assert operation["summary"].startswith("Enqueue runs")
    assert {"201", "404", "409", "413", "422", "429"} <= set(operation["responses"])
    conflict = operation["responses"]["409"]["content"]
    assert list(conflict) == ["application/problem+json"]
    created = operation["responses"]["201"]["content"]["application/json"]["schema"]
    assert created == {"$ref": "#/components/schemas/RunIdsOut"}
    assert "payload" in schema["components"]["schemas"]["RunOut"]["required"]
