"""Issue 17, defect 7: a job that can never fire again is refused with a 422 that says so,
instead of staying ``active`` with no next run, counted against its tenant's quotas."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from cronwheel.api import AuthConfig, create_app
from cronwheel.core.clock import FrozenClock
from cronwheel.store.base import Store
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, problem, spec

NOW = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)
PAST = "2030-05-01T00:00:00Z"
EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *"}


@pytest.fixture
async def client(store: Store) -> Any:
    """An admin client of an app whose clock stands at NOW (tests move it)."""
    clock = FrozenClock(NOW)
    app = create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=clock)
    async with connect(app, ADMIN_TOKEN) as c:
        c.clock = clock  # type: ignore[attr-defined]
        yield c


@pytest.mark.parametrize(
    ("schedule", "field"),
    [
        ({"kind": "cron", "cron": "59 23 31 2 *"}, "schedule.cron"),
        ({"kind": "cron", "cron": "0 0 30 2 *", "timezone": "Europe/Paris"}, "schedule.cron"),
        (
            {"kind": "cron", "cron": "0 0 1 1 *", "end_at": "2030-12-01T00:00:00Z"},
            "schedule.cron",
        ),
        ({**EVERY_MINUTE, "end_at": PAST}, "schedule.end_at"),
        ({"kind": "interval", "every_seconds": 60, "end_at": PAST}, "schedule.end_at"),
        ({"kind": "immediate", "end_at": PAST}, "schedule.end_at"),
        (
            {"kind": "delay", "seconds": 7200, "end_at": "2030-06-01T13:00:00Z"},
            "schedule.seconds",
        ),
        (
            {"kind": "once", "at": "2030-07-01T00:00:00Z", "end_at": "2030-06-15T00:00:00Z"},
            "schedule.at",
        ),
        (
            {"kind": "once", "at": "2030-07-01T00:00:00Z", "start_at": "2030-08-01T00:00:00Z"},
            "schedule.at",
        ),
    ],
)
async def test_a_job_that_would_never_fire_is_422(
    client: httpx.AsyncClient, schedule: dict[str, Any], field: str
) -> None:
    body = problem(await client.post("/v1/jobs", json=spec(schedule=schedule)), 422, field)
    assert "never fire" in body["detail"]
    batch = {"jobs": [spec(), spec(schedule=schedule)]}
    body = problem(await client.post("/v1/jobs/batch", json=batch), 422)
    assert body["errors"][0]["index"] == 1 and body["errors"][0]["field"] == field
    assert (await client.get("/v1/jobs")).json()["items"] == []


async def test_start_at_after_end_at_is_422(client: httpx.AsyncClient) -> None:
    schedule = {**EVERY_MINUTE, "start_at": "2031-01-01T00:00:00Z", "end_at": "2030-12-01T00:00Z"}
    problem(await client.post("/v1/jobs", json=spec(schedule=schedule)), 422, "schedule.end_at")


async def test_schedules_that_still_fire_are_accepted(client: httpx.AsyncClient) -> None:
    for schedule in [
        {"kind": "cron", "cron": "0 0 29 2 *"},  # leap days only: 2032-02-29
        {**EVERY_MINUTE, "end_at": "2030-06-01T12:00:30Z"},
        {"kind": "manual"},  # never fires by itself, by design
        {"kind": "immediate"},
    ]:
        created = await client.post("/v1/jobs", json=spec(schedule=schedule))
        assert created.status_code == 201, created.text


async def test_a_patch_to_a_schedule_that_never_fires_is_422_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    job = (await client.post("/v1/jobs", json=spec(schedule=EVERY_MINUTE))).json()
    url, match = f"/v1/jobs/{job['id']}", {"If-Match": '"1"'}
    for schedule, field in [
        ({"kind": "cron", "cron": "59 23 31 2 *"}, "schedule.cron"),
        ({**EVERY_MINUTE, "end_at": PAST}, "schedule.end_at"),
        ({"kind": "immediate"}, "schedule.kind"),
    ]:
        patched = await client.patch(url, json={"schedule": schedule}, headers=match)
        problem(patched, 422, field)
    after = (await client.get(url)).json()
    assert after["version"] == 1 and after["schedule"] == job["schedule"]
    assert after["next_fire_at"] == job["next_fire_at"]


async def test_a_job_past_its_end_may_still_be_edited_otherwise(
    client: httpx.AsyncClient,
) -> None:
    schedule = {**EVERY_MINUTE, "end_at": "2030-06-01T12:10:00Z"}
    job = (await client.post("/v1/jobs", json=spec(schedule=schedule))).json()
    client.clock.advance(hours=1)  # type: ignore[attr-defined]
    url = f"/v1/jobs/{job['id']}"
    renamed = await client.patch(url, json={"name": "renamed"}, headers={"If-Match": '"1"'})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "renamed"


async def test_preview_refuses_what_create_refuses(client: httpx.AsyncClient) -> None:
    schedule = {"kind": "cron", "cron": "59 23 31 2 *"}
    previewed = await client.post("/v1/schedules/preview", json={"schedule": schedule})
    assert "never fire" in problem(previewed, 422, "schedule.cron")["detail"]
