"""Large bodies through the ASGI app: parsed off the event loop (decision 0036), with the
same answers as small ones, and the caller checked before the body, key looked up once."""

from __future__ import annotations

from typing import Any
from unittest import mock

import httpx
from fastapi import FastAPI

from cronwheel.api.guards import OFF_LOOP_BYTES
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, problem, spec


def batch(count: int, **changes: Any) -> dict[str, Any]:
    return {"jobs": [spec(payload={"pad": "x" * 200}, **changes) for _ in range(count)]}


async def test_a_large_invalid_batch_is_refused_as_a_small_one_is(
    client: httpx.AsyncClient,
) -> None:
    bad = {"kind": "cron", "cron": "61 * * * *"}
    small, large = batch(2, schedule=bad), batch(400, schedule=bad)
    assert len(httpx.Request("POST", "/", json=large).content) > OFF_LOOP_BYTES
    answers = [problem(await client.post("/v1/jobs/batch", json=b), 422) for b in (small, large)]
    assert answers[1]["field"] == answers[0]["field"] == "jobs.0.schedule.cron"
    assert answers[1]["errors"][:2] == answers[0]["errors"]
    assert len(answers[1]["errors"]) == 400


async def test_a_large_batch_is_created_and_replayed_by_its_idempotency_key(
    client: httpx.AsyncClient,
) -> None:
    body = batch(300)
    headers = {"Idempotency-Key": "large-batch"}
    first = await client.post("/v1/jobs/batch", json=body, headers=headers)
    assert first.status_code == 201, first.text
    again = await client.post("/v1/jobs/batch", json=body, headers=headers)
    assert again.json() == first.json()
    other = await client.post("/v1/jobs/batch", json=batch(300), headers=headers)
    problem(other, 409)


async def test_a_body_is_refused_by_the_callers_rules_before_it_is_parsed(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    reader = (await new_key(client, "read"))["token"]
    body = batch(300)
    with mock.patch("cronwheel.api.guards.strict_loads", side_effect=AssertionError("read")):
        async with connect(app) as anonymous:
            problem(await anonymous.post("/v1/jobs/batch", json=body), 401)
        async with connect(app, cookies={"cronwheel_session": reader}) as dashboard:
            refused = await dashboard.post("/v1/jobs/batch", json=body)
            assert "X-CSRF-Token" in problem(refused, 403)["detail"]
        async with connect(app, reader) as read_key:
            problem(await read_key.post("/v1/jobs/batch", json=body), 403)
            tenant = {"Cronwheel-Tenant": "nobody"}
            problem(await read_key.post("/v1/jobs/batch", json=body, headers=tenant), 403)
        async with connect(app, ADMIN_TOKEN) as admin:
            tenant = {"Cronwheel-Tenant": "nobody"}
            problem(await admin.post("/v1/jobs/batch", json=body, headers=tenant), 422)


async def test_the_key_is_looked_up_once(app: FastAPI, client: httpx.AsyncClient) -> None:
    writer = (await new_key(client, "write"))["token"]
    store = app.state.api.store
    with mock.patch.object(store, "find_api_key", wraps=store.find_api_key) as lookups:
        async with connect(app, writer) as c:
            response = await c.post("/v1/jobs", json=spec())
    assert response.status_code == 201, response.text
    assert lookups.call_count == 1  # by the early check; the route's dependency reuses it
