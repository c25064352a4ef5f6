"""``POST /v1/jobs/{id}/backfill`` on each store: runs for a past range, once; the
errors name their field; a quota is honoured before anything is written."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from tests.api.helpers import new_key, new_tenant, problem, spec

# */5 in Europe/Paris: a quarter-hour range two days ago holds three occurrences.
DAY = (datetime.now(UTC) - timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)
RANGE = {"start": DAY.isoformat(), "end": (DAY + timedelta(minutes=15)).isoformat()}


async def test_a_backfill_creates_the_missing_runs_once(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}/backfill"
    done = await client.post(url, json=RANGE)
    assert done.status_code == 200, done.text
    body = done.json()
    assert (body["occurrences"], body["created"]) == (3, 3)
    assert datetime.fromisoformat(body["first"]) == DAY
    assert datetime.fromisoformat(body["last"]) == DAY + timedelta(minutes=10)
    again = (await client.post(url, json={**RANGE, "priority": "high"})).json()
    assert (again["occurrences"], again["created"]) == (3, 0)
    runs = (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"]
    assert sorted(datetime.fromisoformat(r["scheduled_for"]) for r in runs) == [
        DAY + timedelta(minutes=m) for m in (0, 5, 10)
    ]
    assert {(r["state"], r["priority"], r["reason"]) for r in runs} == {
        ("pending", "low", "backfill by admin-token")
    }


async def test_bad_ranges_are_refused_naming_the_field(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}/backfill"
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    problem(await client.post(url, json={**RANGE, "end": future}), 422, "end")
    problem(await client.post(url, json={**RANGE, "end": RANGE["start"]}), 422, "end")
    problem(await client.post(url, json={**RANGE, "start": "2026-01-01T00:00:00"}), 422, "start")
    problem(await client.post(url, json={**RANGE, "start": "1969-12-31T00:00:00Z"}), 422, "start")
    problem(await client.post(url, json={**RANGE, "priority": "urgent"}), 422, "priority")
    problem(await client.post(url, json={"start": RANGE["start"]}), 422, "end")
    too_long = {"start": (DAY - timedelta(days=60)).isoformat(), "end": RANGE["end"]}
    body = problem(await client.post(url, json=too_long), 422, "end")
    assert "10,000" in body["detail"] and "in parts" in body["detail"]
    assert "the 10,001st is " in body["detail"]  # not "10,001th"
    assert (await client.get(f"/v1/jobs/{job['id']}/runs")).json()["items"] == []
    problem(
        await client.post("/v1/jobs/01890000-0000-7000-8000-000000000000/backfill", json=RANGE), 404
    )
    await client.post(f"/v1/jobs/{job['id']}/pause")
    problem(await client.post(url, json=RANGE), 409, "state")


async def test_a_read_key_cannot_backfill_and_the_rate_quota_applies(
    client: httpx.AsyncClient,
) -> None:
    await new_tenant(client, "slow", max_creates_per_second=2)
    writer = await new_key(client, "write", "slow")
    reader = await new_key(client, "read", "slow")
    headers = {"Authorization": f"Bearer {writer['token']}"}
    job = (await client.post("/v1/jobs", json=spec(), headers=headers)).json()
    url = f"/v1/jobs/{job['id']}/backfill"
    read = {"Authorization": f"Bearer {reader['token']}"}
    problem(await client.post(url, json=RANGE, headers=read), 403)
    problem(await client.post(url, json=RANGE, headers=headers), 429)
    runs = await client.get(f"/v1/jobs/{job['id']}/runs", headers=headers)
    assert runs.json()["items"] == []  # refused before anything was written
