"""``GET /v1/status`` after a scripted scenario, on both stores, and how it is scoped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import (
    SCHEDULER_TENANT,
    SHARED_WORKERS,
    AttemptOutcome,
    Job,
    RunState,
    WorkerInfo,
)
from cronwheel.engine.maintenance import MAINTENANCE_LEASE
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run
from cronwheel.store.conformance.status.status import held_scenario
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant
from tests.conftest import open_store

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def app(store: Store, clock: FrozenClock) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=clock)


async def _finish(store: Store, job: Job, state: RunState, outcome: AttemptOutcome) -> None:
    [claimed] = await store.claim_runs(
        "w1",
        [job.pool],
        limit=1,
        now=ago(100),
        prefetch_until=ago(100),
        lease_seconds=600,
        tenant_id=job.tenant_id,
    )
    run = claimed.run
    await store.complete_runs(
        [
            Completion(
                run_id=run.id,
                fence=run.fence,
                worker_id="w1",
                state=state,
                outcome=outcome,
                started_at=ago(99),
                finished_at=ago(90),
                lag_seconds=0.25 if outcome is AttemptOutcome.SUCCEEDED else 1.5,
                error_message="boom" if state is RunState.DEAD else None,
                reason="attempts exhausted" if state is RunState.DEAD else None,
            )
        ]
    )


async def _scenario(store: Store, client: httpx.AsyncClient) -> dict[str, Any]:
    """default/email: 1 succeeded, 1 dead, 1 running, 1 due (waiting 30 s); acme/payroll:
    1 due, 1 dead; a shared worker of email, acme's remote worker of payroll, a scheduler
    owning 2 shards, and the maintenance lease."""
    await new_tenant(client, "acme")
    email = make_job(name="secret-email-job", pool="email", next_fire_at=NOW + timedelta(hours=1))
    payroll = make_job(name="acme-payroll-job", pool="payroll", tenant_id="acme", next_fire_at=None)
    await store.create_jobs([email, payroll])
    await store.materialize_runs([make_run(email, ago(200))], [])
    await _finish(store, email, RunState.SUCCEEDED, AttemptOutcome.SUCCEEDED)
    await store.materialize_runs([make_run(email, ago(199))], [])
    await _finish(store, email, RunState.DEAD, AttemptOutcome.FAILED)
    await store.materialize_runs([make_run(payroll, ago(198))], [])
    await _finish(store, payroll, RunState.DEAD, AttemptOutcome.FAILED)
    await store.materialize_runs([make_run(email, ago(120))], [])
    await store.claim_runs(
        "w1", ["email"], limit=1, now=ago(60), prefetch_until=ago(60), lease_seconds=600
    )
    await store.materialize_runs([make_run(email, ago(30)), make_run(payroll, ago(10))], [])
    workers = {
        "shared": WorkerInfo(
            "worker-shared-1", SHARED_WORKERS, "hostA", ("email",), 8, 1, ago(500), ago(5)
        ),
        "acme": WorkerInfo("acme/w9", "acme", "acme-host", ("payroll",), 2, 0, ago(500), ago(5)),
        "scheduler": WorkerInfo(
            "scheduler-hostB-7", SCHEDULER_TENANT, "hostB", (), 0, 2, ago(500), ago(1)
        ),
    }
    for worker in workers.values():
        await store.register_worker(worker)
    await store.acquire_shards("scheduler-hostB-7", [0, 1], now=ago(1), ttl_seconds=10)
    await store.acquire_shards("maintenance-42", [MAINTENANCE_LEASE], now=ago(1), ttl_seconds=10)
    return {"email": email, "payroll": payroll}


def _pools(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["pool"]: p for p in body["pools"]}


async def test_a_system_admin_sees_every_pool_worker_and_scheduler(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    await _scenario(store, client)
    response = await client.get("/v1/status")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["scope"], body["tenant_id"], body["window_minutes"]) == ("system", None, 5)
    assert body["store"]["reachable"] is True and body["store"]["schema_version"] >= 6
    assert body["version"]
    email, payroll = _pools(body)["email"], _pools(body)["payroll"]
    assert {k: email[k] for k in ("due", "running", "dead", "finished", "failures", "workers")} == {
        "due": 1,
        "running": 1,
        "dead": 1,
        "finished": 2,
        "failures": 1,
        "workers": 1,
    }
    assert email["oldest_due_age_seconds"] == 30.0
    assert (email["lag_p50_seconds"], email["lag_p99_seconds"]) == (0.25, 1.5)
    assert email["throughput_per_minute"] == 0.4  # 2 attempts in 5 minutes
    assert (payroll["due"], payroll["dead"], payroll["workers"]) == (1, 1, 1)
    shown = {w["id"]: w for w in body["workers"]}
    assert shown["acme/w9"]["host"] == "acme-host" and shown["acme/w9"]["tenant_id"] == "acme"
    assert shown["worker-shared-1"]["host"] == "hostA" and shown["worker-shared-1"]["shared"]
    assert body["schedulers"] == [
        {"id": "scheduler-hostB-7", "shards_owned": 2, "last_seen_at": ago(1).isoformat()}
    ]
    assert body["shards"] == {"total": 2, "owned": 2, "unowned": []}
    assert body["maintenance"]["active"] and body["maintenance"]["owner"] == "maintenance-42"
    assert body["healthy"] is True and body["problems"] == []


async def test_a_tenant_sees_its_own_numbers_and_the_shared_fleet_only(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    await _scenario(store, client)
    key = await new_key(client, "read", "acme")
    async with connect(app, key["token"]) as acme:
        response = await acme.get("/v1/status")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["scope"], body["tenant_id"]) == ("tenant", "acme")
    pools = _pools(body)
    assert (pools["payroll"]["due"], pools["payroll"]["dead"]) == (1, 1)
    # The shared worker's pool is listed (the shared fleet is every tenant's), with none
    # of the default tenant's numbers in it.
    email = pools["email"]
    assert (email["due"], email["running"], email["dead"], email["finished"]) == (0, 0, 0, 0)
    assert [(w["id"], w["shared"], w["host"]) for w in body["workers"]] == [
        ("w9", False, "acme-host"),
        ("worker-shared-1", True, None),
    ]
    assert body["schedulers"] == [
        {"id": None, "shards_owned": 2, "last_seen_at": ago(1).isoformat()}
    ]
    assert body["maintenance"]["active"] and body["maintenance"]["owner"] is None
    text = response.text
    for secret in ("secret-email-job", "hostA", "hostB", "maintenance-42", "scheduler-"):
        assert secret not in text


async def test_the_default_tenant_without_system_admin_sees_no_other_tenant(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    await _scenario(store, client)
    key = await new_key(client, "read")
    async with connect(app, key["token"]) as reader:
        body = (await reader.get("/v1/status")).json()
    assert body["scope"] == "tenant"
    assert "payroll" not in _pools(body)  # acme's pool, served by acme's worker only
    assert [w["id"] for w in body["workers"]] == ["worker-shared-1"]
    assert "acme" not in str(body)
    # A system admin acting for acme gets acme's view, not the whole system's.
    acting = (await client.get("/v1/status", headers={"Cronwheel-Tenant": "acme"})).json()
    assert acting["scope"] == "tenant" and "email" in _pools(acting)
    assert _pools(acting)["email"]["due"] == 0


async def test_problems_say_what_to_look_at(
    app: FastAPI, client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = make_job(name="late", pool="nobody-serves", next_fire_at=ago(31))
    await store.create_jobs([job, make_job(next_fire_at=ago(29))])
    await store.materialize_runs([make_run(job, ago(300))], [])
    body = (await client.get("/v1/status", params={"window": 1})).json()
    assert body["healthy"] is False and body["overdue_jobs"] == 1
    assert body["problems"] == [
        "1 active job should have fired over 30 s ago: no scheduler keeps up (is one running?)",
        "pool nobody-serves: 1 due, and no live worker serves it",
        "pool nobody-serves: the oldest due run has waited 300 s",
    ]
    # A scheduler that owns only some of the shards it once had leaves the rest unplanned.
    await store.register_worker(
        WorkerInfo("scheduler-1", SCHEDULER_TENANT, "h", (), 0, 1, ago(60), ago(1))
    )
    await store.acquire_shards("scheduler-1", [0, 1], now=ago(20), ttl_seconds=10)
    await store.acquire_shards("scheduler-1", [2], now=ago(1), ttl_seconds=10)
    body = (await client.get("/v1/status")).json()
    partly = "2 of 3 shards have no live scheduler (0-1): their jobs get no new runs"
    assert partly in body["problems"]
    bad = await client.get("/v1/status", params={"window": 0})
    assert bad.status_code == 422


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_store_that_does_not_answer_is_reported_not_raised(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    closed = await open_store(backend, request, tmp_path)
    await closed.close()  # a real store that no longer answers, whatever the backend says
    app = create_app(closed, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=FrozenClock(NOW))
    async with connect(app, ADMIN_TOKEN) as admin:
        response = await admin.get("/v1/status")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["store"]["reachable"] is False and body["store"]["error"]
    assert body["healthy"] is False
    assert body["problems"][0].startswith("the store does not answer (")
    assert body["pools"] == [] and body["workers"] == []


NO_SCHEDULER = "no scheduler owns shards 0-15: no run is being created on time"
NO_SCHEDULER += " (is a scheduler running?)"


@pytest.mark.parametrize("end", ["stopped", "killed"])
async def test_no_live_lease_on_any_shard_is_a_problem_whatever_the_registry_says(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock, end: str
) -> None:
    """Issue 29: after the only scheduler stopped (it hands its shards back and leaves the
    registry) or was killed (its leases expire, then its registry row ages out), status
    said healthy: the problem was only looked for while a scheduler was listed."""
    holder = "scheduler-h-1"
    await store.register_worker(WorkerInfo(holder, SCHEDULER_TENANT, "h", (), 0, 16, NOW, NOW))
    await store.acquire_shards(holder, list(range(16)), now=NOW, ttl_seconds=10)
    body = (await client.get("/v1/status")).json()
    assert body["healthy"] is True, body["problems"]
    assert (body["shards"]["total"], body["shards"]["owned"]) == (16, 16)
    if end == "stopped":  # what ShardOwner.stop does on SIGTERM
        await store.release_shards(holder, list(range(16)))
        await store.remove_worker(holder)
    for seconds in (10, 40, 75, 3600):  # the issue's +10, +40, +75 s, and much later
        clock.set(NOW + timedelta(seconds=seconds))
        body = (await client.get("/v1/status")).json()
        assert body["schedulers"] == [] or seconds < 60, body["schedulers"]
        assert body["healthy"] is False, (seconds, body)
        assert NO_SCHEDULER in body["problems"], (seconds, body["problems"])
        assert body["shards"] == {"total": 16, "owned": 0, "unowned": list(range(16))}
    # A new scheduler takes them all: healthy again.
    clock.set(NOW + timedelta(seconds=3601))
    await store.acquire_shards("scheduler-h-2", list(range(16)), now=clock.now(), ttl_seconds=10)
    body = (await client.get("/v1/status")).json()
    assert body["healthy"] is True and body["problems"] == []


async def test_runs_a_limit_holds_back_are_notes_not_problems(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    """Issue 29: runs waiting for their full concurrency key (or their ``overlap: queue``
    job's running run) made status say NOT HEALTHY ("the oldest due run has waited 99 s"),
    though the wait is the limit working."""
    await held_scenario(store)
    clock.set(at(100))
    await store.register_worker(
        WorkerInfo("w1", SHARED_WORKERS, "h", ("keyed", "queued"), 4, 2, at(0), at(99))
    )
    body = (await client.get("/v1/status")).json()
    assert body["problems"] == [] and body["healthy"] is True
    assert body["notes"] == [
        "pool keyed: 2 runs wait for their concurrency key (it is full)",
        "pool queued: 1 run waits for their job's running run or unfinished pipeline run"
        " (overlap: queue)",
    ]
    keyed, queued = _pools(body)["keyed"], _pools(body)["queued"]
    assert (keyed["due"], keyed["held_by_key"], keyed["oldest_due_age_seconds"]) == (3, 2, 50)
    assert (queued["due"], queued["held_by_overlap"], queued["oldest_due_age_seconds"]) == (
        2,
        1,
        40,
    )
