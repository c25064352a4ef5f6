"""Pipeline runs over HTTP (decision 0025): start with Idempotency-Key, read with every
task's state, list, cancel, retry a task, and another tenant sees none of it."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, pipeline, problem


async def start(client: httpx.AsyncClient, **headers: str) -> dict[str, Any]:
    created = await client.post("/v1/pipelines", json=pipeline())
    assert created.status_code == 201, created.text
    response = await client.post(f"/v1/pipelines/{created.json()['id']}/runs", headers=headers)
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"/v1/pipeline-runs/{response.json()['id']}"
    body: dict[str, Any] = response.json()
    return body


async def test_a_started_run_has_its_root_task_started_and_reads_back(
    client: httpx.AsyncClient,
) -> None:
    run = await start(client)
    assert (run["state"], run["version"], run["cancel_requested"]) == ("running", 1, False)
    [root] = run["tasks"]
    assert (root["task"], root["instance"], root["state"]) == ("extract", 0, "started")
    assert root["run_state"] == "pending" and isinstance(root["run_id"], int)
    read = await client.get(f"/v1/pipeline-runs/{run['id']}")
    assert read.status_code == 200 and read.json() == run
    task_run = (await client.get(f"/v1/runs/{root['run_id']}")).json()
    assert task_run["job_id"] == run["job_id"]
    listed = (await client.get("/v1/pipeline-runs")).json()
    assert [r["id"] for r in listed["items"]] == [run["id"]]
    assert listed["items"][0]["tasks"] == []
    of_pipeline = (await client.get(f"/v1/pipelines/{run['pipeline_id']}/runs")).json()
    assert [r["id"] for r in of_pipeline["items"]] == [run["id"]]


async def test_idempotency_key_starts_one_run(client: httpx.AsyncClient) -> None:
    created = (await client.post("/v1/pipelines", json=pipeline())).json()
    url = f"/v1/pipelines/{created['id']}/runs"
    first = await client.post(url, headers={"Idempotency-Key": "go-1"})
    second = await client.post(url, headers={"Idempotency-Key": "go-1"})
    assert first.status_code == second.status_code == 201
    assert first.json()["id"] == second.json()["id"]
    listed = (await client.get(f"/v1/pipelines/{created['id']}/runs")).json()
    assert len(listed["items"]) == 1


async def test_cancel_cancels_the_pending_task_and_ends_the_run(
    client: httpx.AsyncClient,
) -> None:
    run = await start(client)
    response = await client.post(f"/v1/pipeline-runs/{run['id']}/cancel")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["state"] == "cancelled" and body["cancel_requested"] is True
    states = {t["task"]: (t["state"], t["reason"]) for t in body["tasks"]}
    assert states["extract"] == ("cancelled", None)
    assert states["load"] == ("skipped", "upstream_failed")
    again = await client.post(f"/v1/pipeline-runs/{run['id']}/cancel")
    assert again.status_code == 200 and again.json()["state"] == "cancelled"


async def test_retrying_a_task_that_is_not_dead_is_a_409_naming_it(
    client: httpx.AsyncClient,
) -> None:
    run = await start(client)
    body = problem(
        await client.post(f"/v1/pipeline-runs/{run['id']}/tasks/extract/retry"), 409, "task"
    )
    assert "not dead" in body["detail"]
    problem(await client.post(f"/v1/pipeline-runs/{run['id']}/tasks/nope/retry"), 404)
    problem(await client.get("/v1/pipeline-runs/not-a-uuid"), 404)
    problem(await client.post("/v1/pipelines/01a20fa6-fb73-7001-8cb9-ab88fea7d46c/runs"), 404)


async def test_another_tenant_cannot_read_or_cancel_a_pipeline_run(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    run = await start(client)
    await new_tenant(client, "acme")
    key = await new_key(client, "admin", "acme")
    async with connect(app, key["token"]) as other:
        problem(await other.get(f"/v1/pipeline-runs/{run['id']}"), 404)
        problem(await other.post(f"/v1/pipeline-runs/{run['id']}/cancel"), 404)
        assert (await other.get("/v1/pipeline-runs")).json()["items"] == []
    assert (await client.get(f"/v1/pipeline-runs/{run['id']}")).json()["state"] == "running"


async def test_starting_a_pipeline_counts_against_the_create_rate(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "metered", max_creates_per_second=1)
    key = await new_key(client, "write", "metered")
    async with connect(app, key["token"]) as writer:
        created = (await writer.post("/v1/pipelines", json=pipeline())).json()
        url = f"/v1/pipelines/{created['id']}/runs"
        assert (await writer.post(url)).status_code == 201
        # Three tasks took three tokens of a one-per-second bucket: the next waits.
        response = await writer.post(url)
        problem(response, 429, "max_creates_per_second")
        assert int(response.headers["retry-after"]) >= 1
        assert len((await writer.get(url)).json()["items"]) == 1


async def test_replaying_a_dead_task_gives_it_its_own_budget(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """A dead task whose definition says one attempt gets one more from a replay, not
    its pipeline job's three (lifecycle.replay_budget)."""
    once = {"action": {"type": "handler", "name": "once"}, "retry": {"max_attempts": 1}}
    created = await client.post("/v1/pipelines", json=pipeline(tasks={"once": once}, edges=[]))
    assert created.status_code == 201, created.text
    started = (await client.post(f"/v1/pipelines/{created.json()['id']}/runs")).json()
    key = await new_key(client, "worker")
    async with connect(app, key["token"]) as worker:
        body = {"worker_id": "w1", "pools": ["default"], "capacity": 1, "lease_seconds": 30}
        [claimed] = (await worker.post("/v1/workers/claim", json=body)).json()["runs"]
        run = claimed["run"]
        assert run["job_id"] == started["job_id"] and run["max_attempts"] == 1
        failed = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "failed"},
        )
        assert failed.json()["state"] == "dead", failed.text
    replayed = await client.post(f"/v1/runs/{run['id']}/replay")
    assert replayed.status_code == 200, replayed.text
    assert (replayed.json()["state"], replayed.json()["attempt"]) == ("pending", 1)
    assert replayed.json()["max_attempts"] == 2
