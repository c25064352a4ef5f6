"""``GET /v1/jobs?order=``: by creation, name or next fire time, either way, each paged
with a cursor that carries the order's key and is refused by another order."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.api.helpers import problem, spec

ORDERS = ["created", "-created", "name", "-name", "next_fire", "-next_fire"]


def _once(name: str, at: str) -> dict[str, Any]:
    return spec(name, schedule={"kind": "once", "at": at})


async def _jobs(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    """Jobs whose names and next fire times tie, and two that will not fire."""
    specs = [
        _once("ord-beta", "2031-05-01T08:00:00Z"),
        _once("ord-Alpha", "2031-05-01T07:00:00.000001Z"),
        _once("ord-alpha", "2031-05-01T08:00:00Z"),
        _once("ord-élan", "2031-05-01T07:00:00Z"),
        _once("ord-paused", "2031-04-01T00:00:00Z"),
        spec("ord-manual", schedule={"kind": "manual"}),
        _once("ord-a:b", "2031-05-01T08:00:00Z"),
    ]
    made = []
    for body in specs:
        response = await client.post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        made.append(response.json())
    paused = await client.post(f"/v1/jobs/{made[4]['id']}/pause")
    assert paused.status_code == 200, paused.text
    made[4] = paused.json()
    return made


def _expected(jobs: list[dict[str, Any]], order: str) -> list[str]:
    key = order.removeprefix("-")

    def value(job: dict[str, Any]) -> tuple[Any, ...]:
        if key == "name":
            return (job["name"], job["id"])
        if key == "next_fire":
            fire = job["next_fire_at"] if job["state"] == "active" else None
            return (fire is None, fire or "", job["id"])
        return (job["id"],)

    return [j["name"] for j in sorted(jobs, key=value, reverse=order.startswith("-"))]


async def _walk(client: httpx.AsyncClient, order: str, limit: int) -> list[str]:
    names: list[str] = []
    params: dict[str, Any] = {"order": order, "limit": limit, "name_prefix": "ord-"}
    while True:
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        names += [j["name"] for j in body["items"]]
        if body["next_cursor"] is None:
            return names
        params["cursor"] = body["next_cursor"]


@pytest.mark.parametrize("order", ORDERS)
async def test_each_order_pages_through_every_job_once(
    client: httpx.AsyncClient, order: str
) -> None:
    jobs = await _jobs(client)
    want = _expected(jobs, order)
    assert len(want) == 7
    for limit in (1, 2, 3, 100):
        assert await _walk(client, order, limit) == want, limit


async def test_jobs_that_will_not_fire_come_last_soonest_first(client: httpx.AsyncClient) -> None:
    await _jobs(client)
    names = await _walk(client, "next_fire", 2)
    assert names[:2] == ["ord-élan", "ord-Alpha"]  # one microsecond apart
    assert set(names[-2:]) == {"ord-paused", "ord-manual"}
    assert set((await _walk(client, "-next_fire", 2))[:2]) == {"ord-paused", "ord-manual"}


async def test_a_cursor_of_another_order_is_a_422_naming_cursor(
    client: httpx.AsyncClient,
) -> None:
    await _jobs(client)
    cursors = {}
    for order in ORDERS:
        page = await client.get("/v1/jobs", params={"order": order, "limit": 1})
        cursors[order] = page.json()["next_cursor"]
    for made_for, cursor in cursors.items():
        for order in ORDERS:
            answer = await client.get("/v1/jobs", params={"order": order, "cursor": cursor})
            if order == made_for:
                assert answer.status_code == 200, answer.text
            else:
                body = problem(answer, 422, "cursor")
                assert repr(made_for) in body["detail"] and repr(order) in body["detail"]
    # Without an order, the list is in creation order: a name cursor is refused.
    problem(await client.get("/v1/jobs", params={"cursor": cursors["name"]}), 422, "cursor")


async def test_an_unknown_order_or_a_forged_cursor_is_a_422(client: httpx.AsyncClient) -> None:
    jobs = await _jobs(client)
    body = problem(await client.get("/v1/jobs", params={"order": "last_run"}), 422, "order")
    assert "next_fire" in body["detail"] or "next_fire" in str(body.get("errors"))
    job_id = jobs[0]["id"]

    def forged(text: str) -> str:
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    for text, order in (
        (f"job:next_fire:{job_id}:soon", "next_fire"),
        (f"job:next_fire:{job_id}:{10**30}", "next_fire"),
        ("job:name:not-an-id:x", "name"),
        (f"job:name:{job_id}:nul\x00", "name"),
        (f"job:last_run:{job_id}:x", "created"),
    ):
        problem(
            await client.get("/v1/jobs", params={"order": order, "cursor": forged(text)}),
            422,
            "cursor",
        )
    # A cursor of an older version (the last id alone) still continues the creation order.
    older = await client.get(
        "/v1/jobs", params={"order": "-created", "cursor": forged(f"job:{job_id}")}
    )
    assert older.status_code == 200 and older.json()["items"] == []
    problem(
        await client.get("/v1/jobs", params={"order": "name", "cursor": forged(f"job:{job_id}")}),
        422,
        "cursor",
    )


async def test_a_long_name_fits_in_its_cursor(client: httpx.AsyncClient) -> None:
    """Names of 200 characters of 4 bytes each: the longest cursor the name order makes."""
    for tail in "ab":
        made = await client.post("/v1/jobs", json=spec("ord-" + "𝄞" * 195 + tail))
        assert made.status_code == 201, made.text
    assert await _walk(client, "-name", 1) == ["ord-" + "𝄞" * 195 + t for t in "ba"]
