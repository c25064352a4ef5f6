"""Remote workers over HTTP: claim → heartbeat → complete, fenced, on both stores."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from cronwheel.core.model import Overlap
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.observability.metrics import ApiMetrics
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_job, make_run
from tests.api.conftest import connect
from tests.api.helpers import new_key, new_tenant, pipeline, problem, spec


async def worker_client(app: FastAPI, admin: httpx.AsyncClient) -> httpx.AsyncClient:
    key = await new_key(admin, "worker")
    return connect(app, key["token"])


async def claim(worker: httpx.AsyncClient, pool: str = "remote", **extra: Any) -> list[Any]:
    body = {"worker_id": "w1", "pools": [pool], "capacity": 10, "lease_seconds": 30, **extra}
    response = await worker.post("/v1/workers/claim", json=body)
    assert response.status_code == 200, response.text
    runs: list[Any] = response.json()["runs"]
    return runs


async def immediate(client: httpx.AsyncClient, pool: str = "remote", **changes: Any) -> str:
    job = spec(schedule={"kind": "immediate"}, pool=pool, payload={"n": 1}, **changes)
    response = await client.post("/v1/jobs", json=job)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


async def test_claim_heartbeat_complete(app: FastAPI, client: httpx.AsyncClient) -> None:
    job_id = await immediate(client)
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker, host="box-1")
        run = claimed["run"]
        assert run["job_id"] == job_id
        assert run["state"] == "running"
        assert run["lease_owner"] == "default/w1"
        assert claimed["payload"] == {"n": 1}
        assert claimed["action"]["type"] == "webhook"
        assert claimed["job_name"]
        assert claimed["lease_expires_at"] == run["lease_expires_at"]
        assert await claim(worker, host="box-1") == []

        lease = {"run_id": run["id"], "fence": run["fence"]}
        beat = await worker.post(
            "/v1/workers/heartbeat", json={"worker_id": "w1", "leases": [lease]}
        )
        assert beat.json() == {"extended": [run["id"]], "lost": [], "cancel_requested": []}
        workers = (await worker.get("/v1/workers")).json()["items"]
        assert [(w["id"], w["host"], w["pools"], w["in_flight"]) for w in workers] == [
            ("w1", "box-1", ["remote"], 1)
        ]

        done = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "succeeded"},
        )
        assert done.status_code == 200, done.text
        assert done.json()["state"] == "succeeded"
        again = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "succeeded"},
        )
        problem(again, 409, "fence")
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert [(a["outcome"], a["worker_id"]) for a in detail["attempts"]] == [
        ("succeeded", "default/w1")
    ]


async def test_the_api_counts_the_overlap_skips_of_a_remote_claim(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    job = make_job(overlap=Overlap.SKIP, pool="remote")
    due = datetime.now(UTC) - timedelta(minutes=1)
    await store.create_jobs(
        [job], [make_run(job, due + timedelta(seconds=s), overlap=Overlap.SKIP) for s in (0, 1)]
    )
    registry = app.state.metrics.metrics.registry
    assert isinstance(app.state.metrics, ApiMetrics)

    def skips() -> float:
        return registry.get_sample_value("cronwheel_runs_skipped_total", {"reason": "overlap"})

    before = skips()  # the process's counter: other tests may have added to it
    async with await worker_client(app, client) as worker:
        assert len(await claim(worker)) == 1  # the earliest runs; the next waits its turn
        assert skips() == before
        assert await claim(worker) == []  # its job still runs: the next one is skipped
    assert skips() == before + 1


async def test_a_stale_fence_or_another_worker_is_refused(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await immediate(client)
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        url = f"/v1/runs/{run['id']}/complete"
        stale = {"worker_id": "w1", "fence": run["fence"] - 1, "outcome": "succeeded"}
        problem(await worker.post(url, json=stale), 409, "fence")
        other = {"worker_id": "w2", "fence": run["fence"], "outcome": "succeeded"}
        problem(await worker.post(url, json=other), 409, "fence")
        lease = {"run_id": run["id"], "fence": run["fence"]}
        beat = await worker.post(
            "/v1/workers/heartbeat", json={"worker_id": "w2", "leases": [lease]}
        )
        assert beat.json()["lost"] == [run["id"]]
        problem(await worker.post("/v1/runs/999999/complete", json=stale), 404)
    assert (await client.get(f"/v1/runs/{run['id']}")).json()["state"] == "running"


async def test_failures_retry_then_die(app: FastAPI, client: httpx.AsyncClient) -> None:
    retry = {"max_attempts": 2, "backoff": "fixed", "initial_delay": 0}
    await immediate(client, retry=retry)
    async with await worker_client(app, client) as worker:
        for expected in ("pending", "dead"):
            [claimed] = await claim(worker)
            run = claimed["run"]
            failed = await worker.post(
                f"/v1/runs/{run['id']}/complete",
                json={
                    "worker_id": "w1",
                    "fence": run["fence"],
                    "outcome": "failed",
                    "error_class": "HTTP503",
                    "error_message": "it broke",
                    "http_status": 503,
                },
            )
            assert failed.status_code == 200, failed.text
            assert failed.json()["state"] == expected
            assert failed.json()["last_error"] == "it broke"
    dead = (await client.get("/v1/dead-letter")).json()["items"]
    assert [r["id"] for r in dead] == [run["id"]]
    detail = (await client.get(f"/v1/runs/{run['id']}")).json()
    assert [(a["error_class"], a["http_status"]) for a in detail["attempts"]] == [
        ("HTTP503", 503),
        ("HTTP503", 503),
    ]


async def test_a_pipeline_task_fails_by_its_own_retry_policy_over_http(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """A task's own retry policy, not its pipeline job's, decides its retry when a
    remote worker reports the failure: as an in-process worker's failure does
    (lifecycle.claimed_run builds both)."""
    hourly = {"max_attempts": 3, "backoff": "fixed", "initial_delay": 3600, "max_delay": 7200}
    task = {"action": {"type": "handler", "name": "slow"}, "pool": "remote", "retry": hourly}
    created = await client.post("/v1/pipelines", json=pipeline(tasks={"slow": task}, edges=[]))
    assert created.status_code == 201, created.text
    started = await client.post(f"/v1/pipelines/{created.json()['id']}/runs")
    assert started.status_code == 201, started.text
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        before = datetime.now(UTC)
        failed = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "failed"},
        )
        assert failed.status_code == 200, failed.text
    body = failed.json()
    assert (body["state"], body["attempt"]) == ("pending", 1)
    due = datetime.fromisoformat(body["available_at"])
    assert due - before >= timedelta(seconds=3600)
    assert due - before < timedelta(seconds=3700)


async def test_cancel_reaches_the_worker_at_its_heartbeat(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await immediate(client)
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        assert (await client.post(f"/v1/runs/{run['id']}/cancel")).json()["cancel_requested"]
        lease = {"run_id": run["id"], "fence": run["fence"]}
        beat = await worker.post(
            "/v1/workers/heartbeat",
            json={"worker_id": "w1", "leases": [lease], "pools": ["remote"], "capacity": 4},
        )
        assert beat.json()["cancel_requested"] == [run["id"]]
        done = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "cancelled"},
        )
        assert done.json()["state"] == "cancelled"
        [seen] = (await worker.get("/v1/workers")).json()["items"]
        assert seen["capacity"] == 4


async def test_bad_worker_bodies_are_422(app: FastAPI, client: httpx.AsyncClient) -> None:
    async with await worker_client(app, client) as worker:
        bad = {"worker_id": "w/1", "pools": ["remote"]}
        problem(await worker.post("/v1/workers/claim", json=bad), 422, "worker_id")
        problem(
            await worker.post("/v1/workers/claim", json={"worker_id": "w", "pools": []}),
            422,
            "pools",
        )
        problem(
            await worker.post(
                "/v1/workers/claim", json={"worker_id": "w", "pools": ["p"], "capacity": 0}
            ),
            422,
            "capacity",
        )
        lease = {"run_id": 1, "fence": 2**40}
        problem(
            await worker.post("/v1/workers/heartbeat", json={"worker_id": "w", "leases": [lease]}),
            422,
            "leases.0.fence",
        )
        outcome = {"worker_id": "w", "fence": 1, "outcome": "exploded"}
        problem(await worker.post("/v1/runs/1/complete", json=outcome), 422, "outcome")
        status = {"worker_id": "w", "fence": 1, "outcome": "failed", "http_status": 999}
        problem(await worker.post("/v1/runs/1/complete", json=status), 422, "http_status")


async def test_a_worker_claims_only_its_own_tenants_runs(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await new_tenant(client, "acme")
    theirs = await immediate(client)  # the default tenant's run, due first
    acme_writer = connect(app, (await new_key(client, "write", "acme"))["token"])
    async with acme_writer:
        ours = await immediate(acme_writer)
    acme_worker = connect(app, (await new_key(client, "worker", "acme"))["token"])
    async with acme_worker:
        claimed = await claim(acme_worker)
    assert [c["run"]["job_id"] for c in claimed] == [ours]
    assert claimed[0]["run"]["lease_owner"] == "acme/w1"
    async with await worker_client(app, client) as default_worker:
        assert [c["run"]["job_id"] for c in await claim(default_worker)] == [theirs]


async def test_every_tenant_sees_the_shared_in_process_workers_without_their_host_or_load(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    shared = Worker(store, WorkerConfig(pools={"email": 2, "default": 3}))
    await shared.heartbeat()  # how an in-process worker announces itself
    for tenant in ("acme", "beta"):
        await new_tenant(client, tenant)
    acme_key, beta_key = [await new_key(client, "read", t) for t in ("acme", "beta")]
    beta_worker_key = await new_key(client, "worker", "beta")
    async with connect(app, beta_worker_key["token"]) as beta_worker:
        await claim(beta_worker, pool="beta-pool")  # a remote worker of beta's own

    async with connect(app, acme_key["token"]) as acme, connect(app, beta_key["token"]) as beta:
        [seen_by_acme] = (await acme.get("/v1/workers")).json()["items"]
        seen_by_beta = (await beta.get("/v1/workers")).json()["items"]
    assert seen_by_acme["id"] == shared.id
    assert (seen_by_acme["shared"], seen_by_acme["pools"], seen_by_acme["capacity"]) == (
        True,
        ["email", "default"],
        5,
    )
    assert (seen_by_acme["host"], seen_by_acme["in_flight"]) == (None, None)
    assert seen_by_acme["last_seen_at"] and seen_by_acme["started_at"]
    assert [(w["id"], w["shared"]) for w in seen_by_beta] == [("w1", False), (shared.id, True)]
    assert seen_by_beta[0]["host"] and seen_by_beta[0]["in_flight"] == 0
    assert seen_by_beta[1] == seen_by_acme

    # The system admin runs the infrastructure: it sees the shared worker in full.
    [as_admin] = (await client.get("/v1/workers")).json()["items"]
    assert (as_admin["id"], as_admin["host"], as_admin["in_flight"]) == (
        shared.id,
        socket.gethostname(),
        0,
    )


async def test_heartbeats_carry_progress_and_checkpoints_fenced(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    retry = {"max_attempts": 3, "backoff": "fixed", "initial_delay": 0}
    await immediate(client, retry=retry)
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        assert (run["progress"], run["checkpoint"]) == (None, None)
        lease = {
            "run_id": run["id"],
            "fence": run["fence"],
            "progress": {"fraction": 0.5, "message": "half"},
            "checkpoint": {"state": {"page": 5}},
        }
        beat = await worker.post(
            "/v1/workers/heartbeat", json={"worker_id": "w1", "leases": [lease]}
        )
        assert beat.json()["extended"] == [run["id"]]
        shown = (await client.get(f"/v1/runs/{run['id']}")).json()
        assert (shown["progress"]["fraction"], shown["progress"]["message"]) == (0.5, "half")
        assert shown["checkpoint"]["state"] == {"page": 5} and shown["checkpoint"]["at"]
        # A stale fence stores nothing.
        stale = {**lease, "fence": run["fence"] - 1, "checkpoint": {"state": "stale"}}
        beat = await worker.post(
            "/v1/workers/heartbeat", json={"worker_id": "w1", "leases": [stale]}
        )
        assert beat.json()["lost"] == [run["id"]]
        # The completion carries the last one; the retry's claim gets it.
        failed = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={
                "worker_id": "w1",
                "fence": run["fence"],
                "outcome": "failed",
                "error_message": "crashed",
                "checkpoint": {"state": {"page": 7}},
                "progress": {"fraction": 0.7},
            },
        )
        assert failed.status_code == 200, failed.text
        assert failed.json()["checkpoint"]["state"] == {"page": 7}
        assert failed.json()["progress"]["message"] is None
        [again] = await claim(worker)
        assert again["run"]["checkpoint"]["state"] == {"page": 7}


async def test_bad_reports_are_422_naming_the_field(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    async with await worker_client(app, client) as worker:
        for extra, field in (
            ({"progress": {"fraction": 1.5}}, "leases.0.progress.fraction"),
            ({"progress": {"fraction": 0.5, "message": "m" * 201}}, "leases.0.progress.message"),
            ({"checkpoint": {"state": "x" * 70_000}}, "leases.0.checkpoint.state"),
            ({"checkpoint": {}}, "leases.0.checkpoint.state"),
        ):
            lease = {"run_id": 1, "fence": 1, **extra}
            body = {"worker_id": "w", "leases": [lease]}
            problem(await worker.post("/v1/workers/heartbeat", json=body), 422, field)
        done = {"worker_id": "w", "fence": 1, "outcome": "failed", "progress": {"fraction": -1}}
        problem(await worker.post("/v1/runs/1/complete", json=done), 422, "progress.fraction")
