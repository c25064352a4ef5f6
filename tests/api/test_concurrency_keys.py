"""Concurrency keys over HTTP, on both stores (decision 0031): the job field, its 422s
naming the field, the run's rendered key, and ``why`` saying a key holds a run back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import FrozenClock
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_run
from tests.api.helpers import ADMIN_TOKEN, problem, spec

NOW = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)
MANUAL = {"kind": "manual"}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(NOW)


@pytest.fixture
def app(store: Store, clock: FrozenClock) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=clock)


async def _manual(client: httpx.AsyncClient, **changes: Any) -> dict[str, Any]:
    body = spec(
        **{
            "schedule": MANUAL,
            "concurrency": {"key": "report:{payload.customer}", "limit": 1},
            **changes,
        }
    )
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()
    return job


async def test_a_job_shows_its_concurrency_and_runs_their_keys(
    client: httpx.AsyncClient,
) -> None:
    job = await _manual(client)
    assert job["concurrency"] == {"key": "report:{payload.customer}", "limit": 1}
    response = await client.post(
        f"/v1/jobs/{job['id']}/runs", json={"payloads": [{"customer": 42}, {"customer": "x"}]}
    )
    assert response.status_code in (200, 201), response.text
    ids = response.json()["run_ids"]
    keys = [(await client.get(f"/v1/runs/{i}")).json()["concurrency_key"] for i in ids]
    assert keys == ["report:42", "report:x"]
    etag = (await client.get(f"/v1/jobs/{job['id']}")).headers["etag"]
    patched = await client.patch(
        f"/v1/jobs/{job['id']}", json={"concurrency": None}, headers={"If-Match": etag}
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["concurrency"] is None
    plain = await client.post("/v1/jobs", json=spec())
    assert plain.json()["concurrency"] is None


@pytest.mark.parametrize(
    ("concurrency", "field"),
    [
        ({"key": "report:{customer}", "limit": 1}, "concurrency.key"),
        ({"key": "report:{payload.a b}", "limit": 1}, "concurrency.key"),
        ({"key": "x" * 201, "limit": 1}, "concurrency.key"),
        ({"key": "", "limit": 1}, "concurrency.key"),
        ({"key": "k", "limit": 0}, "concurrency.limit"),
        ({"key": "k", "limit": 1001}, "concurrency.limit"),
        ({"key": "k", "limit": 1.5}, "concurrency.limit"),
        ({"limit": 1}, "concurrency.key"),
        ("report", "concurrency"),
    ],
)
async def test_a_bad_concurrency_is_a_422_naming_the_field(
    client: httpx.AsyncClient, concurrency: object, field: str
) -> None:
    problem(await client.post("/v1/jobs", json=spec(concurrency=concurrency)), 422, field)
    created = await client.post("/v1/jobs", json=spec())
    patch = await client.patch(
        f"/v1/jobs/{created.json()['id']}",
        json={"concurrency": concurrency},
        headers={"If-Match": created.headers["etag"]},
    )
    problem(patch, 422, field)


async def test_why_says_a_key_holds_a_due_run_back(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    cron = {"kind": "cron", "cron": "0 9,10 * * *", "timezone": "UTC"}
    created = await _manual(client, schedule=cron, payload={"customer": 7})
    job = await store.get_job("default", created["id"])
    assert job is not None
    runs = [
        make_run(job, t, concurrency_key="report:7", concurrency_limit=1)
        for t in (datetime(2030, 1, 15, 9, tzinfo=UTC), datetime(2030, 1, 15, 10, tzinfo=UTC))
    ]
    await store.materialize_runs(runs, [])
    claimed = await store.claim_runs(
        "w", ["default"], limit=5, now=clock.now(), prefetch_until=clock.now(), lease_seconds=60
    )
    assert [c.run.scheduled_for.hour for c in claimed] == [9]  # the key of 1: 10:00 waits
    body = (await client.get(f"/v1/jobs/{job.id}/why", params={"at": "10:00"})).json()
    assert body["verdict"] == "pending"
    assert (body["run"]["concurrency_key"], body["run"]["concurrency_limit"]) == ("report:7", 1)
    said = " ".join(body["explanation"])
    assert "concurrency key 'report:7'" in said and "1 are running" in said, said
