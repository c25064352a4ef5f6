"""``GET /v1/jobs/{id}/why``: why didn't it run at that time? On both stores."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import REASON_MISFIRE, AttemptOutcome, Job, RunState
from cronwheel.store.base import Completion, Store
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant, problem, spec

PARIS = ZoneInfo("Europe/Paris")
CREATED = datetime(2030, 1, 1, 0, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(CREATED)


@pytest.fixture
def app(store: Store, clock: FrozenClock) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=clock)


async def _job(client: httpx.AsyncClient, store: Store, cron: str, **schedule: Any) -> Job:
    body = spec(schedule={"kind": "cron", "cron": cron, "timezone": "Europe/Paris", **schedule})
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job = await store.get_job("default", response.json()["id"])
    assert job is not None
    return job


def _run_at(job: Job, local: datetime, **changes: Any) -> Any:
    from cronwheel.store.conformance.factories import make_run

    return make_run(job, local.replace(tzinfo=PARIS).astimezone(UTC), **changes)


async def _why(client: httpx.AsyncClient, job: Job, at: str) -> dict[str, Any]:
    response = await client.get(f"/v1/jobs/{job.id}/why", params={"at": at})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_run_that_succeeded(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = await _job(client, store, "0 9 * * *")
    nine = datetime(2030, 1, 15, 9, 0)
    await store.materialize_runs([_run_at(job, nine)], [])
    [claimed] = await store.claim_runs(
        "w",
        [job.pool],
        limit=1,
        now=clock.now(),
        prefetch_until=datetime.max.replace(tzinfo=UTC),
        lease_seconds=60,
    )
    started = nine.replace(tzinfo=PARIS)
    await store.complete_runs(
        [
            Completion(
                run_id=claimed.run.id,
                fence=claimed.run.fence,
                worker_id="w",
                state=RunState.SUCCEEDED,
                outcome=AttemptOutcome.SUCCEEDED,
                started_at=started,
                finished_at=started,
            )
        ]
    )
    clock.set(datetime(2030, 1, 15, 12, 0, tzinfo=PARIS))
    body = await _why(client, job, "09:00")
    assert body["verdict"] == "ran"
    assert body["assumed"] == "09:00 read as today (2030-01-15) in Europe/Paris"
    assert body["at"] == "2030-01-15T09:00:00+01:00"
    assert body["occurrence"]["at"] == "2030-01-15T09:00:00+01:00"
    assert body["run"]["id"] == claimed.run.id and body["run"]["state"] == "succeeded"
    assert [a["outcome"] for a in body["attempts"]] == ["succeeded"]
    assert any("succeeded" in line for line in body["explanation"])


async def test_a_run_skipped_with_its_reason(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = await _job(client, store, "0 9 * * *")
    skipped = _run_at(job, datetime(2030, 1, 14, 9, 0), state=RunState.SKIPPED)
    skipped.reason = REASON_MISFIRE
    await store.materialize_runs([skipped], [])
    clock.set(datetime(2030, 1, 15, 12, 0, tzinfo=PARIS))
    body = await _why(client, job, "2030-01-14T09:00")
    assert body["verdict"] == "skipped"
    assert body["run"]["reason"] == REASON_MISFIRE
    assert f"was skipped: {REASON_MISFIRE}." in " ".join(body["explanation"])
    # The same instant given with an offset names the same occurrence.
    assert (await _why(client, job, "2030-01-14T08:00:00Z"))["verdict"] == "skipped"


async def test_no_occurrence_in_a_dst_gap_shows_the_fires_around_it(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    skipping = await _job(client, store, "30 2 * * *", dst_gap="skip")
    moving = await _job(client, store, "30 2 * * *")
    clock.set(datetime(2030, 4, 2, tzinfo=UTC))
    body = await _why(client, skipping, "2030-03-31T02:30")
    assert body["verdict"] == "no_occurrence"
    assert body["occurrence"] is None
    assert body["previous_fire"]["at"] == "2030-03-30T02:30:00+01:00"
    assert body["next_fire"]["at"] == "2030-04-01T02:30:00+02:00"
    said = " ".join(body["explanation"])
    assert "02:30:00 does not exist on 2030-03-31 in Europe/Paris (DST gap)" in said
    assert "No occurrence of the schedule falls at that time" in said
    # With the default policy, the 02:30 of that day fires when the gap ends: marked.
    moved = await _why(client, moving, "2030-03-31T02:30")
    assert moved["occurrence"]["at"] == "2030-03-31T03:00:00+02:00"
    assert moved["occurrence"]["dst"] == "moved"
    assert moved["verdict"] == "no_run"  # no run was written for it in this test


async def test_before_the_job_existed_and_while_it_was_paused(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    clock.set(datetime(2030, 1, 10, tzinfo=UTC))
    job = await _job(client, store, "0 9 * * *")
    before = await _why(client, job, "2030-01-05T09:00")
    assert before["verdict"] == "not_created"
    assert any("created at 2030-01-10T00:00:00+00:00" in line for line in before["explanation"])
    clock.set(datetime(2030, 1, 11, tzinfo=UTC))
    assert (await client.post(f"/v1/jobs/{job.id}/pause")).status_code == 200
    clock.set(datetime(2030, 1, 13, tzinfo=UTC))
    assert (await client.post(f"/v1/jobs/{job.id}/resume", json={})).status_code == 200
    paused = await _why(client, job, "2030-01-12T09:00")
    # The resume recorded the occurrences the pause skipped: the run says so, and why.
    assert (paused["verdict"], paused["run"]["reason"]) == ("skipped", "paused")
    assert any("resumed at 2030-01-13" in line for line in paused["explanation"])


async def test_bad_times_and_other_tenants_jobs(
    app: FastAPI, client: httpx.AsyncClient, store: Store
) -> None:
    job = await _job(client, store, "0 9 * * *")
    problem(await client.get(f"/v1/jobs/{job.id}/why", params={"at": "9 o'clock"}), 422, "at")
    problem(await client.get(f"/v1/jobs/{job.id}/why", params={"at": ""}), 422, "at")
    await new_tenant(client, "acme")
    key = await new_key(client, "read", "acme")
    async with connect(app, key["token"]) as acme:
        problem(await acme.get(f"/v1/jobs/{job.id}/why", params={"at": "09:00"}), 404)


async def test_without_a_time_the_latest_occurrence_is_asked_about(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = await _job(client, store, "0 9 * * *")
    skipped = _run_at(job, datetime(2030, 1, 14, 9, 0), state=RunState.SKIPPED)
    skipped.reason = REASON_MISFIRE
    await store.materialize_runs([skipped], [])
    clock.set(datetime(2030, 1, 15, 8, 0, tzinfo=PARIS))  # before today's 09:00
    response = await client.get(f"/v1/jobs/{job.id}/why")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["asked"] == "latest"
    assert body["at"] == "2030-01-14T09:00:00+01:00"
    assert body["assumed"] == (
        "No time given: the latest occurrence, 2030-01-14T09:00:00+01:00 in Europe/Paris"
    )
    assert body["verdict"] == "skipped" and body["run"]["reason"] == REASON_MISFIRE
    # At 09:00 exactly, that occurrence is the latest.
    clock.set(datetime(2030, 1, 15, 9, 0, tzinfo=PARIS))
    body = (await client.get(f"/v1/jobs/{job.id}/why")).json()
    assert body["at"] == "2030-01-15T09:00:00+01:00" and body["verdict"] == "no_run"


async def test_without_a_time_a_new_job_is_asked_about_its_first_occurrence(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = await _job(client, store, "0 9 * * *")  # created at 01:00 in Paris
    body = (await client.get(f"/v1/jobs/{job.id}/why")).json()
    assert body["at"] == "2030-01-01T09:00:00+01:00" and body["verdict"] == "not_yet"
    assert body["assumed"].startswith("No time given and no occurrence since the job was created")
    manual = await client.post("/v1/jobs", json=spec(schedule={"kind": "manual"}))
    body = (await client.get(f"/v1/jobs/{manual.json()['id']}/why")).json()
    assert body["verdict"] == "no_occurrence"
    assert body["assumed"].startswith("No time given and no occurrence: asked about now")


async def test_a_due_run_held_back_by_max_running_says_so(
    client: httpx.AsyncClient, store: Store, clock: FrozenClock
) -> None:
    job = await _job(client, store, "0 9,10 * * *")
    nine, ten = datetime(2030, 1, 15, 9, 0), datetime(2030, 1, 15, 10, 0)
    await store.materialize_runs([_run_at(job, nine), _run_at(job, ten)], [])
    clock.set(datetime(2030, 1, 15, 12, 0, tzinfo=PARIS))
    body = await _why(client, job, "10:00")
    assert body["verdict"] == "pending"
    assert "waits for a worker of pool" in " ".join(body["explanation"])
    default = await store.get_tenant("default")
    assert default is not None
    await store.update_tenant(replace(default, max_running=1))
    claimed = await store.claim_runs(
        "w", [job.pool], limit=5, now=clock.now(), prefetch_until=clock.now(), lease_seconds=60
    )
    assert len(claimed) == 1  # the cap: the 10:00 run waits, pending
    body = await _why(client, job, "10:00")
    assert body["verdict"] == "pending" and body["run"]["state"] == "pending"
    said = " ".join(body["explanation"])
    assert "max_running" in said and "1 runs in flight" in said and "1 are running" in said
