"""Answers that tell the truth, over HTTP and through the SDK, on both stores: a job's
last outcome, why a run is dead, notices of runs that wait for a worker, idempotent
control verbs, and the next fire time of a job just created."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from cronwheel.sdk import AsyncClient, LastRunInfo
from cronwheel.store.base import Store
from cronwheel.web.notices import NO_LIVE_WORKER
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, problem, spec
from tests.api.test_workers import claim, immediate, worker_client


def _fresh_notices(app: FastAPI) -> None:
    """No reuse of the served pools between two reads: the test changes the registry."""
    app.state.api.notices.cache_seconds = 0.0


async def _fail_for_good(worker: httpx.AsyncClient, pool: str, outcome: str) -> dict[str, Any]:
    [claimed] = await claim(worker, pool=pool)
    run = claimed["run"]
    response = await worker.post(
        f"/v1/runs/{run['id']}/complete",
        json={
            "worker_id": "w1",
            "fence": run["fence"],
            "outcome": outcome,
            "error_message": "HTTP 404",
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_an_immediate_job_whose_run_died_says_so(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    job_id = await immediate(client, pool="remote", retry={"max_attempts": 1})
    created = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert (created["state"], created["last_run"]) == ("completed", None)
    async with await worker_client(app, client) as worker:
        dead = await _fail_for_good(worker, "remote", "failed")
    assert (dead["state"], dead["reason"]) == ("dead", "attempts exhausted: attempt 1 of 1 failed")

    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["state"] == "completed"  # the job is done firing; its last run tells how
    assert job["last_run"] == {
        "id": dead["id"],
        "state": "dead",
        "scheduled_for": dead["scheduled_for"],
        "finished_at": dead["finished_at"],
        "attempt": 1,
        "reason": "attempts exhausted: attempt 1 of 1 failed",
        "last_error": dead["last_error"],
    }
    [listed] = (await client.get("/v1/jobs")).json()["items"]
    assert listed["last_run"] == job["last_run"]
    async with AsyncClient("http://test", ADMIN_TOKEN, transport=httpx.ASGITransport(app)) as cw:
        info = await cw.get_job(job_id)
        assert isinstance(info.last_run, LastRunInfo)
        assert (info.last_run.state, info.last_run.reason) == ("dead", dead["reason"])
        assert info.notices == []


async def test_a_permanent_failure_is_a_permanent_attempt(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await immediate(client, pool="remote")
    async with await worker_client(app, client) as worker:
        dead = await _fail_for_good(worker, "remote", "permanent")
    run = (await client.get(f"/v1/runs/{dead['id']}")).json()
    assert run["reason"] == "permanent error: the action said retrying cannot help"
    assert [a["outcome"] for a in run["attempts"]] == ["permanent"]


async def test_a_job_no_live_worker_serves_carries_a_notice(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    _fresh_notices(app)
    job_id = await immediate(client, pool="email")
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    [notice] = job["notices"]
    assert notice["code"] == NO_LIVE_WORKER and "'email'" in notice["message"]
    [run] = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["items"]
    assert [n["code"] for n in run["notices"]] == [NO_LIVE_WORKER]
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert [n["code"] for n in detail["notices"]] == [NO_LIVE_WORKER]
    cron = (await client.post("/v1/jobs", json=spec(pool="email"))).json()
    assert [n["code"] for n in cron["notices"]] == [NO_LIVE_WORKER]  # said at creation

    # Another tenant's remote worker serving "email" serves only its own tenant.
    await new_tenant(client, "acme")
    stranger = await new_key(client, "worker", tenant_id="acme")
    async with connect(app, stranger["token"]) as other:
        assert await claim(other, pool="email") == []
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["notices"] != []

    async with await worker_client(app, client) as worker:
        await claim(worker, pool="sms")  # a live worker, but of another pool
        assert (await client.get(f"/v1/runs/{run['id']}")).json()["notices"] != []
        [claimed] = await claim(worker, pool="email")
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["notices"] == []
    assert (await client.get(f"/v1/jobs/{cron['id']}")).json()["notices"] == []
    running = (await client.get(f"/v1/runs/{claimed['run']['id']}")).json()
    assert running["notices"] == []


async def test_an_in_process_worker_serves_every_tenant(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    from cronwheel.engine.worker import Worker, WorkerConfig

    _fresh_notices(app)
    await new_tenant(client, "acme")
    writer = await new_key(client, "write", tenant_id="acme")
    async with connect(app, writer["token"]) as acme:
        created = (await acme.post("/v1/jobs", json=spec(pool="reports"))).json()
        assert [n["code"] for n in created["notices"]] == [NO_LIVE_WORKER]
        worker = Worker(store, WorkerConfig(pools={"reports": 1}), webhook_secret=b"s")
        await worker.heartbeat()  # what a running worker does every few seconds
        assert (await acme.get(f"/v1/jobs/{created['id']}")).json()["notices"] == []
        await store.remove_worker(worker.id)  # a clean stop
        assert (await acme.get(f"/v1/jobs/{created['id']}")).json()["notices"] != []


async def test_a_paused_or_cancelled_job_waits_for_nothing(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    _fresh_notices(app)
    job = (await client.post("/v1/jobs", json=spec(pool="nobody"))).json()
    assert (await client.post(f"/v1/jobs/{job['id']}/pause")).json()["notices"] == []
    assert (await client.delete(f"/v1/jobs/{job['id']}")).json()["notices"] == []


async def test_control_verbs_are_idempotent(app: FastAPI, client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}"
    paused = await client.post(f"{url}/pause")
    again = await client.post(f"{url}/pause")
    assert (paused.status_code, again.status_code) == (200, 200)
    assert again.json() == paused.json() and paused.json()["version"] == 2
    assert again.headers["ETag"] == '"2"'
    patched = await client.patch(url, json={"pool": job["pool"]}, headers={"If-Match": "2"})
    assert (patched.status_code, patched.headers["ETag"]) == (200, '"2"')  # nothing changed
    resumed = (await client.post(f"{url}/resume")).json()
    assert (await client.post(f"{url}/resume")).json() == resumed
    cancelled = await client.delete(url)
    twice = await client.delete(url)
    assert (cancelled.status_code, twice.status_code) == (200, 200)
    assert twice.json() == cancelled.json() and cancelled.json()["version"] == 4
    body = problem(await client.post(f"{url}/pause"), 409, "state")
    assert "cancelled" in body["detail"]

    done_id = await immediate(client, pool="remote")
    body = problem(await client.post(f"/v1/jobs/{done_id}/resume"), 409, "state")
    assert "completed" in body["detail"]

    [run] = (await client.get(f"/v1/jobs/{done_id}/runs")).json()["items"]
    first = await client.post(f"/v1/runs/{run['id']}/cancel")
    second = await client.post(f"/v1/runs/{run['id']}/cancel")
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.json()["state"] == "cancelled" and second.json() == first.json()


async def test_a_running_run_is_asked_to_stop_once(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    await immediate(client, pool="remote")
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
    run_id = claimed["run"]["id"]
    first = (await client.post(f"/v1/runs/{run_id}/cancel")).json()
    assert (first["state"], first["cancel_requested"]) == ("running", True)
    assert (await client.post(f"/v1/runs/{run_id}/cancel")).json() == first
    audit = [e.action for e in await store.list_audit("default", str(run_id))]
    assert audit == ["cancel_requested"]


def _instant(value: str) -> datetime:
    return datetime.fromisoformat(value)


async def test_every_new_job_shows_its_next_fire_time_at_once(client: httpx.AsyncClient) -> None:
    before = datetime.now().astimezone()
    delay = await client.post("/v1/jobs", json=spec(schedule={"kind": "delay", "seconds": 90}))
    after = datetime.now().astimezone()
    body = delay.json()
    due = _instant(body["next_fire_at"])
    assert before + timedelta(seconds=90) <= due <= after + timedelta(seconds=90)
    assert (body["state"], body["schedule"]["kind"]) == ("active", "once")
    read = (await client.get(f"/v1/jobs/{body['id']}")).json()
    assert read["next_fire_at"] == body["next_fire_at"]

    once = spec(schedule={"kind": "once", "at": "2031-05-01T08:00:00+02:00"})
    body = (await client.post("/v1/jobs", json=once)).json()
    assert _instant(body["next_fire_at"]) == _instant("2031-05-01T06:00:00+00:00")

    interval = spec(schedule={"kind": "interval", "every_seconds": 600})
    body = (await client.post("/v1/jobs", json=interval)).json()
    created = _instant(body["created_at"])
    assert _instant(body["next_fire_at"]) == created + timedelta(seconds=600)

    cron = spec(schedule={"kind": "cron", "cron": "0 0 1 1 *", "timezone": "UTC"})
    body = (await client.post("/v1/jobs", json=cron)).json()
    fire = _instant(body["next_fire_at"])
    assert (fire.month, fire.day, fire.hour, fire.minute) == (1, 1, 0, 0) and fire > before
