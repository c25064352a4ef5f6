"""Idempotency-Key: a retried create replays the first answer; another body is a 409."""

from __future__ import annotations

import httpx

from tests.api.helpers import problem, spec


async def test_same_key_and_body_replay_the_first_answer(client: httpx.AsyncClient) -> None:
    job = spec("once-only")
    headers = {"Idempotency-Key": "create-once-only"}
    first = await client.post("/v1/jobs", json=job, headers=headers)
    assert first.status_code == 201
    # the same request, its keys in another order: the same request
    again = await client.post("/v1/jobs", json=dict(reversed(job.items())), headers=headers)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["etag"] == first.headers["etag"]
    assert len((await client.get("/v1/jobs")).json()["items"]) == 1


async def test_same_key_with_another_body_is_a_conflict(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "k-1"}
    assert (await client.post("/v1/jobs", json=spec("a"), headers=headers)).status_code == 201
    problem(await client.post("/v1/jobs", json=spec("b"), headers=headers), 409, "Idempotency-Key")
    batch = {"jobs": [spec("a")]}
    problem(await client.post("/v1/jobs/batch", json=batch, headers=headers), 409)


async def test_a_refused_request_is_not_kept(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "k-2"}
    bad = spec("late", schedule={"kind": "cron", "cron": "99 * * * *"})
    problem(await client.post("/v1/jobs", json=bad, headers=headers), 422)
    good = await client.post("/v1/jobs", json=spec("late"), headers=headers)
    assert good.status_code == 201


async def test_batch_and_trigger_replay(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "batch-1"}
    batch = {"jobs": [spec("b1"), spec("b2")]}
    first = await client.post("/v1/jobs/batch", json=batch, headers=headers)
    again = await client.post("/v1/jobs/batch", json=batch, headers=headers)
    assert again.status_code == 201
    assert again.json() == first.json()
    job_id = first.json()["items"][0]["id"]
    trigger = {"Idempotency-Key": "trigger-1"}
    run = await client.post(f"/v1/jobs/{job_id}/trigger", headers=trigger)
    same = await client.post(f"/v1/jobs/{job_id}/trigger", headers=trigger)
    assert same.json() == run.json()
    runs = (await client.get(f"/v1/jobs/{job_id}/runs")).json()["items"]
    assert len(runs) == 1


async def test_keys_are_checked_and_scoped(client: httpx.AsyncClient) -> None:
    problem(
        await client.post("/v1/jobs", json=spec(), headers={"Idempotency-Key": "x" * 256}),
        422,
        "Idempotency-Key",
    )
    problem(
        await client.post("/v1/jobs", json=spec(), headers={"Idempotency-Key": "a b"}),
        422,
        "Idempotency-Key",
    )
