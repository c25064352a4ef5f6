"""Runs and the dead-letter queue over HTTP, on both stores."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from tests.api.helpers import problem
from tests.api.test_workers import claim, immediate, worker_client


async def kill(
    app: FastAPI, client: httpx.AsyncClient, count: int, pool: str = "remote"
) -> list[int]:
    """``count`` dead runs, each of its own job, failed for good by a remote worker."""
    for _ in range(count):
        await immediate(client, pool=pool)
    dead: list[int] = []
    async with await worker_client(app, client) as worker:
        for claimed in await claim(worker, pool=pool):
            run = claimed["run"]
            response = await worker.post(
                f"/v1/runs/{run['id']}/complete",
                json={"worker_id": "w1", "fence": run["fence"], "outcome": "permanent"},
            )
            assert response.json()["state"] == "dead"
            dead.append(run["id"])
    return dead


async def test_run_detail_has_attempts(app: FastAPI, client: httpx.AsyncClient) -> None:
    [run_id] = await kill(app, client, 1)
    run = (await client.get(f"/v1/runs/{run_id}")).json()
    assert run["state"] == "dead"
    assert run["attempt"] == 1
    assert run["idempotency_key"].startswith(run["job_id"])
    [attempt] = run["attempts"]
    assert attempt["run_id"] == run_id
    assert attempt["outcome"] == "permanent"  # a permanent failure says so in its attempt
    assert run["reason"].startswith("permanent error")
    assert attempt["finished_at"].endswith("+00:00")


async def test_replay_one_dead_run(app: FastAPI, client: httpx.AsyncClient) -> None:
    [run_id] = await kill(app, client, 1)
    replayed = await client.post(f"/v1/runs/{run_id}/replay")
    assert replayed.status_code == 200, replayed.text
    assert replayed.json()["state"] == "pending"
    assert replayed.json()["max_attempts"] > 1
    problem(await client.post(f"/v1/runs/{run_id}/replay"), 409, "state")


async def test_dead_letter_lists_and_replays(app: FastAPI, client: httpx.AsyncClient) -> None:
    dead = await kill(app, client, 3)
    listed = (await client.get("/v1/dead-letter", params={"limit": 2})).json()
    assert [r["id"] for r in listed["items"]] == sorted(dead, reverse=True)[:2]
    rest = (await client.get("/v1/dead-letter", params={"cursor": listed["next_cursor"]})).json()
    assert [r["id"] for r in rest["items"]] == sorted(dead)[:1]
    assert rest["next_cursor"] is None
    job_id = listed["items"][0]["job_id"]
    of_job = (await client.get("/v1/dead-letter", params={"job_id": job_id})).json()["items"]
    assert [r["job_id"] for r in of_job] == [job_id]
    nobody = await client.get("/v1/dead-letter", params={"job_id": "no-such-job"})
    assert nobody.json() == {"items": [], "next_cursor": None}

    by_ids = await client.post("/v1/dead-letter/replay", json={"run_ids": [dead[0], 424242]})
    assert by_ids.json() == {"replayed": [dead[0]]}
    by_job = await client.post("/v1/dead-letter/replay", json={"job_id": job_id, "all": True})
    assert by_job.json() == {"replayed": [r["id"] for r in of_job]}
    problem(await client.post("/v1/dead-letter/replay", json={"job_id": job_id}), 422, "run_ids")
    problem(await client.post("/v1/dead-letter/replay", json={}), 422, "run_ids")
    missing = {"job_id": "01890000-0000-7000-8000-000000000000", "all": True}
    problem(await client.post("/v1/dead-letter/replay", json=missing), 404)


async def test_cancel_a_pending_run(client: httpx.AsyncClient) -> None:
    job_id = await immediate(client)
    [run] = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["items"]
    cancelled = await client.post(f"/v1/runs/{run['id']}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["state"] == "cancelled"
    assert (await client.post(f"/v1/runs/{run['id']}/cancel")).json()["state"] == "cancelled"


OTHER_SPELLINGS = ["{n}.0", "+{n}", "%20{n}", "{n}%20", "0{n}", "%2B{n}", "{n}_0"]
"""Spellings int() or pydantic would read as run n (issue 29, item 10): none addresses it."""


@pytest.mark.parametrize("spelling", OTHER_SPELLINGS)
async def test_a_run_is_addressed_by_its_digits_only(
    app: FastAPI, client: httpx.AsyncClient, spelling: str
) -> None:
    [run_id] = await kill(app, client, 1)
    assert (await client.get(f"/v1/runs/{run_id}")).status_code == 200
    other = spelling.format(n=run_id)
    problem(await client.get(f"/v1/runs/{other}"), 422, "run_id")
    problem(await client.post(f"/v1/runs/{other}/replay"), 422, "run_id")
    problem(await client.post(f"/v1/runs/{other}/cancel"), 422, "run_id")
    async with await worker_client(app, client) as worker:
        done = {"worker_id": "w1", "fence": 1, "outcome": "succeeded"}
        problem(await worker.post(f"/v1/runs/{other}/complete", json=done), 422, "run_id")


async def test_digits_of_other_scripts_name_no_run(app: FastAPI, client: httpx.AsyncClient) -> None:
    [run_id] = await kill(app, client, 1)
    assert run_id < 10
    for digit in (chr(0xFF10 + run_id), chr(0x0660 + run_id), "\u00b2"):  # fullwidth, Arabic
        problem(await client.get(f"/v1/runs/{digit}"), 422, "run_id")
