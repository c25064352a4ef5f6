"""Notification targets and the notifications' dead letter over HTTP, on both stores."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from cronwheel.security.sealing import Sealer, open_url
from cronwheel.store.base import NotificationResult, Store
from tests.api.helpers import SECRETS_KEY, problem, spec
from tests.api.test_workers import claim, immediate, worker_client

TARGET = {"on": ["dead"], "url": "https://example.com/events"}


async def test_a_job_names_its_targets(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=spec(notify=[TARGET]))
    assert created.status_code == 201, created.text
    assert created.json()["notify"] == [TARGET]
    got = (await client.get(f"/v1/jobs/{created.json()['id']}")).json()
    assert got["notify"] == [TARGET]
    assert (await client.post("/v1/jobs", json=spec())).json()["notify"] == []


async def test_a_password_in_a_target_url_is_shown_masked(
    client: httpx.AsyncClient, store: Store
) -> None:
    target = {"on": ["dead"], "url": "https://ops:hunter2-secret@example.com/events"}
    created = (await client.post("/v1/jobs", json=spec(notify=[target]))).json()
    assert created["notify"] == [{"on": ["dead"], "url": "https://ops:***@example.com/events"}]
    # A change of something else keeps the stored URL (the workers' notifier sends it).
    headers = {"If-Match": "1"}
    patched = await client.patch(f"/v1/jobs/{created['id']}", json={"payload": 1}, headers=headers)
    assert patched.status_code == 200, patched.text
    job = await store.get_job("default", created["id"])
    assert job is not None and "hunter2-secret" not in repr(job.notify)  # sealed at rest
    [stored] = job.notify
    opened = open_url(str(stored["url"]), "default", Sealer([SECRETS_KEY]))
    assert opened == target["url"]  # what the notifier sends


async def test_bad_targets_are_422_naming_the_field(client: httpx.AsyncClient) -> None:
    bad = [
        ("notify.0.on", [{"on": [], "url": "https://example.com"}]),
        ("notify.1.on.0", [TARGET, {"on": ["finished"], "url": "https://example.com"}]),
        ("notify.0.on", [{"on": ["dead", "dead"], "url": "https://example.com"}]),
        ("notify.0.url", [{"on": ["dead"], "url": "ftp://example.com"}]),
        ("notify.0.url", [{"on": ["dead"]}]),
        ("notify", [TARGET] * 6),
        # The workers' egress policy, as for webhook actions: no internal address.
        ("notify.1.url", [TARGET, {"on": ["dead"], "url": "http://127.0.0.1:8080/x"}]),
        ("notify.0.url", [{"on": ["dead"], "url": "http://metadata.google.internal/"}]),
    ]
    for field, notify in bad:
        problem(await client.post("/v1/jobs", json=spec(notify=notify)), 422, field)


async def test_dead_notifications_are_listed_and_replayed(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    await immediate(client, notify=[TARGET])
    async with await worker_client(app, client) as worker:
        [claimed] = await claim(worker)
        run = claimed["run"]
        done = await worker.post(
            f"/v1/runs/{run['id']}/complete",
            json={"worker_id": "w1", "fence": run["fence"], "outcome": "permanent"},
        )
        assert done.json()["state"] == "dead"
    [pending] = (await client.get("/v1/notifications")).json()["items"]
    assert (pending["event_id"], pending["state"]) == (f"run-{run['id']}-dead-1", "pending")
    assert (await client.get("/v1/notifications", params={"state": "dead"})).json()["items"] == []
    [n] = await store.claim_notifications(now=await store.now(), limit=1, lease_seconds=5)
    result = NotificationResult(n.id, n.tries, delivered=False, error="410 Gone")
    await store.finish_notifications([result], now=await store.now())
    [dead] = (await client.get("/v1/notifications", params={"state": "dead"})).json()["items"]
    assert (dead["id"], dead["last_error"], dead["tries"]) == (n.id, "410 Gone", 1)
    replayed = await client.post("/v1/notifications/replay", json={"ids": [n.id, n.id + 1]})
    assert replayed.status_code == 200 and replayed.json() == {"replayed": [n.id]}
    assert (await client.post("/v1/notifications/replay", json={"ids": [n.id]})).json() == {
        "replayed": []
    }
    problem(await client.post("/v1/notifications/replay", json={"ids": []}), 422, "ids")
    problem(await client.get("/v1/notifications", params={"state": "lost"}), 422, "state")
    problem(await client.get("/v1/notifications", params={"cursor": "nope"}), 422, "cursor")
