"""``POST /v1/schedules/preview``: fire times, DST marks, words, and the same errors as a
job create gives for the same schedule."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.api.conftest import connect
from tests.api.helpers import new_key, problem, spec

PARIS = {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"}


async def test_a_preview_shows_wall_times_offsets_and_the_dst_gap(
    client: httpx.AsyncClient,
) -> None:
    schedule = {**PARIS, "start_at": "2027-03-26T00:00:00Z"}
    answer = await client.post("/v1/schedules/preview", json={"schedule": schedule, "count": 5})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["timezone"] == "Europe/Paris"
    assert body["description"].startswith("At 02:30, every day, in Europe/Paris (")
    assert "not before 2027-03-26 00:00 UTC" in body["description"]
    fires = body["fires"]
    assert [f["local"] for f in fires] == [
        "2027-03-26T02:30:00+01:00",
        "2027-03-27T02:30:00+01:00",
        "2027-03-28T03:00:00+02:00",
        "2027-03-29T02:30:00+02:00",
        "2027-03-30T02:30:00+02:00",
    ]
    assert fires[0]["at"] == "2027-03-26T01:30:00+00:00"
    assert [f["offset"] for f in fires] == ["+01:00", "+01:00", "+02:00", "+02:00", "+02:00"]
    assert [f["dst"] for f in fires] == [None, None, "moved", None, None]
    assert [f["offset_changed"] for f in fires] == [False, False, True, False, False]


async def test_the_count_defaults_to_ten_and_other_kinds_are_in_utc(
    client: httpx.AsyncClient,
) -> None:
    body = (await client.post("/v1/schedules/preview", json={"schedule": PARIS})).json()
    assert len(body["fires"]) == 10
    interval = {"kind": "interval", "every_seconds": 300}
    body = (await client.post("/v1/schedules/preview", json={"schedule": interval})).json()
    assert body["timezone"] == "UTC" and body["description"] == "Every 5 minutes"
    assert {f["offset"] for f in body["fires"]} == {"+00:00"}
    manual = {"schedule": {"kind": "manual"}}
    body = (await client.post("/v1/schedules/preview", json=manual)).json()
    assert body["fires"] == [] and body["description"].startswith("Never by itself")


BAD_SCHEDULES: list[Any] = [
    {"kind": "cron", "cron": "61 * * * *"},
    {"kind": "cron", "cron": "0 0 * * * *", "dialect": "quartz"},
    {"kind": "cron", "cron": "* * * *"},
    {"kind": "cron", "cron": "0 9 * * *", "timezone": "Mars/Olympus_Mons"},
    {"kind": "cron", "cron": "0 9 * * *", "dialect": "vixie"},
    {"kind": "cron", "cron": "0 9 * * *", "dst_gap": "later"},
    {"kind": "cron", "cron": "0 9 * * *", "every": 5},
    {"kind": "cron"},
    {"kind": "weekly"},
    {"cron": "0 9 * * *"},
    {"kind": "interval", "every_seconds": 0},
    {"kind": "once", "at": "2001-01-01T00:00:00Z"},
    {"kind": "once", "at": "tomorrow"},
    {"kind": "immediate", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"},
    "0 9 * * *",
]


@pytest.mark.parametrize("schedule", BAD_SCHEDULES, ids=[str(s) for s in BAD_SCHEDULES])
async def test_a_bad_schedule_gets_the_errors_a_job_create_gets(
    client: httpx.AsyncClient, schedule: Any
) -> None:
    created = await client.post("/v1/jobs", json=spec(schedule=schedule))
    previewed = await client.post("/v1/schedules/preview", json={"schedule": schedule})
    expected = problem(created, 422)
    assert expected["field"].startswith("schedule")
    assert problem(previewed, 422) == expected


@pytest.mark.parametrize("count", [0, 101, "ten"])
async def test_the_count_is_one_to_a_hundred(client: httpx.AsyncClient, count: Any) -> None:
    answer = await client.post("/v1/schedules/preview", json={"schedule": PARIS, "count": count})
    problem(answer, 422, "count")


async def test_a_read_key_may_preview(app: FastAPI, client: httpx.AsyncClient) -> None:
    key = await new_key(client, "read")
    async with connect(app, key["token"]) as reader:
        answer = await reader.post("/v1/schedules/preview", json={"schedule": PARIS})
    assert answer.status_code == 200, answer.text
    async with connect(app) as nobody:
        problem(await nobody.post("/v1/schedules/preview", json={"schedule": PARIS}), 401)
