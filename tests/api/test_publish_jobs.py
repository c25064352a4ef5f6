"""Publish jobs (issue 30 item 2): the broker must be one a live worker of the job's pool
names, and ``to`` one its kind can take; both refused as 422 naming the field."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from cronwheel.core.model import SHARED_WORKERS, WorkerInfo
from cronwheel.store.base import Store
from tests.api.helpers import pipeline, problem, spec


def publish(broker: str = "events", to: str = "orders.created", **extra: Any) -> dict[str, Any]:
    return {"type": "publish", "broker": broker, "to": to, **extra}


async def announce(store: Store, worker_id: str, pools: tuple[str, ...], **brokers: str) -> None:
    now = datetime.now(UTC)
    worker = WorkerInfo(worker_id, SHARED_WORKERS, "h", pools, 4, 0, now, now, brokers)
    await store.register_worker(worker)


async def test_a_broker_no_live_worker_of_the_pool_names_is_422_naming_action_broker(
    client: httpx.AsyncClient, store: Store
) -> None:
    await announce(store, "w1", ("default",), jobs="rabbitmq")
    await announce(store, "w2", ("other",), events="nats")  # another pool's: no help
    answer = await client.post("/v1/jobs", json=spec(action=publish()))
    body = problem(answer, 422, "action.broker")
    assert "no live worker of pool 'default' names a broker 'events'" in body["detail"]
    assert "they name: jobs" in body["detail"]
    assert "--broker events=URL" in body["detail"]


async def test_a_broker_a_live_worker_names_is_accepted_and_its_to_checked_by_kind(
    client: httpx.AsyncClient, store: Store
) -> None:
    await announce(store, "w1", ("default",), events="nats", jobs="rabbitmq", log="redis")
    for action in (publish(), publish("jobs", "billing/invoice.paid"), publish("log", "audit")):
        created = await client.post("/v1/jobs", json=spec(action=action))
        assert created.status_code == 201, created.text
        assert created.json()["action"] == action
    body = problem(await client.post("/v1/jobs", json=spec(action=publish(to="a.*"))), 422)
    assert body["field"] == "action.to" and "wildcard" in body["detail"]
    no_exchange = spec(action=publish("jobs", "invoices"))
    body = problem(await client.post("/v1/jobs", json=no_exchange), 422, "action.to")
    assert "exchange/routing key" in body["detail"]


async def test_a_pool_with_no_live_worker_accepts_the_job_to_wait_for_its_workers(
    client: httpx.AsyncClient,
) -> None:
    """Decision 0049: jobs may come before their workers (a deploy, `cronwheel dev`)."""
    created = await client.post("/v1/jobs", json=spec(action=publish("any")))
    assert created.status_code == 201, created.text


async def test_a_patch_to_a_pool_whose_workers_lack_the_broker_is_422(
    client: httpx.AsyncClient, store: Store
) -> None:
    await announce(store, "w1", ("default",), events="nats")
    await announce(store, "w2", ("mail",))
    created = await client.post("/v1/jobs", json=spec(action=publish()))
    assert created.status_code == 201, created.text
    patched = await client.patch(
        f"/v1/jobs/{created.json()['id']}",
        json={"pool": "mail"},
        headers={"If-Match": created.headers["ETag"]},
    )
    problem(patched, 422, "action.broker")


async def test_a_batch_names_the_item_with_the_unknown_broker(
    client: httpx.AsyncClient, store: Store
) -> None:
    await announce(store, "w1", ("default",), events="nats")
    jobs = [spec(action=publish()), spec(action=publish("nope"))]
    body = problem(await client.post("/v1/jobs/batch", json={"jobs": jobs}), 422)
    assert body["field"] == "jobs.1.action.broker", body


async def test_a_bad_broker_name_or_missing_to_is_422_naming_the_field(
    client: httpx.AsyncClient,
) -> None:
    bad_name = spec(action=publish("no spaces"))
    body = problem(await client.post("/v1/jobs", json=bad_name), 422, "action.broker")
    assert "--broker NAME=URL" in body["detail"]
    no_to = spec(action={"type": "publish", "broker": "events"})
    problem(await client.post("/v1/jobs", json=no_to), 422, "action.to")


async def test_a_to_with_a_control_character_is_422_naming_action_to(
    client: httpx.AsyncClient,
) -> None:
    """A Redis stream key may be any string; a `to` is shown in logs and terminals."""
    answer = await client.post("/v1/jobs", json=spec(action=publish("log", "audit\x1b[2J")))
    body = problem(answer, 422, "action.to")
    assert "U+001B" in body["detail"]


async def test_a_pipeline_task_publishes_to_a_broker_its_pools_workers_name(
    client: httpx.AsyncClient, store: Store
) -> None:
    """A task's broker is checked as a job's: by the live workers of the task's pool."""
    await announce(store, "w1", ("default",), events="nats")
    await announce(store, "w2", ("db",), jobs="rabbitmq")
    sent = pipeline()
    sent["tasks"]["notify"]["action"] = publish("jobs", "billing/done")  # a default task
    body = problem(await client.post("/v1/pipelines", json=sent), 422)
    assert body["field"] == "tasks.notify.action.broker", body
    assert "no live worker of pool 'default' names a broker 'jobs'" in body["detail"]
    sent["tasks"]["notify"]["action"] = publish(to="orders.*")
    body = problem(await client.post("/v1/pipelines", json=sent), 422)
    assert body["field"] == "tasks.notify.action.to" and "wildcard" in body["detail"]
    sent["tasks"]["notify"]["action"] = publish()
    sent["tasks"]["load"]["action"] = publish("jobs", "billing/loaded")  # pool db's broker
    created = await client.post("/v1/pipelines", json=sent)
    assert created.status_code == 201, created.text
    tasks = created.json()["tasks"]
    assert tasks["notify"]["action"] == publish()
    changed = {k: sent[k] for k in ("tasks", "edges")}
    changed["tasks"]["load"]["action"] = publish("events", "orders.loaded")  # not db's
    updated = await client.put(
        f"/v1/pipelines/{created.json()['id']}",
        json=changed,
        headers={"If-Match": created.headers["ETag"]},
    )
    problem(updated, 422, "tasks.load.action.broker")
