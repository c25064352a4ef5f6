"""Cursor pagination: opaque, and stable while items are inserted."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.helpers import problem, spec


async def pages(client: httpx.AsyncClient, url: str, limit: int) -> list[list[Any]]:
    found: list[list[Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        body = (await client.get(url, params=params)).json()
        found.append([item["id"] for item in body["items"]])
        cursor = body["next_cursor"]
        if cursor is None:
            return found


async def test_job_pages_stay_stable_while_jobs_are_created(client: httpx.AsyncClient) -> None:
    first = [(await client.post("/v1/jobs", json=spec())).json()["id"] for _ in range(5)]
    page1 = (await client.get("/v1/jobs", params={"limit": 2})).json()
    assert [j["id"] for j in page1["items"]] == first[:2]
    later = [(await client.post("/v1/jobs", json=spec())).json()["id"] for _ in range(3)]
    page2 = (
        await client.get("/v1/jobs", params={"limit": 2, "cursor": page1["next_cursor"]})
    ).json()
    assert [j["id"] for j in page2["items"]] == first[2:4]
    rest = await pages(client, "/v1/jobs", 2)
    assert [job_id for found in rest for job_id in found] == first + later
    assert rest[-1] != []


async def test_run_pages_go_newest_first(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    url = f"/v1/jobs/{job['id']}/runs"
    runs = [(await client.post(f"/v1/jobs/{job['id']}/trigger")).json()["id"] for _ in range(5)]
    walked = await pages(client, url, 2)
    assert walked == [runs[::-1][:2], runs[::-1][2:4], runs[::-1][4:]]
    assert await pages(client, url, 5) == [runs[::-1]]


async def test_bad_cursors_are_422(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=spec())).json()
    await client.post(f"/v1/jobs/{job['id']}/trigger")
    await client.post(f"/v1/jobs/{job['id']}/trigger")
    run_cursor = (await client.get(f"/v1/jobs/{job['id']}/runs", params={"limit": 1})).json()[
        "next_cursor"
    ]
    for cursor in ("%%%", "bm90LWEtY3Vyc29y", run_cursor):
        problem(await client.get("/v1/jobs", params={"cursor": cursor}), 422, "cursor")
    problem(await client.get("/v1/dead-letter", params={"cursor": "am9iOng"}), 422, "cursor")
