"""The jobs pages over HTTP on both stores (the browser tests cover what a person does):
the run timeline's pages, notices, and refusals as pages."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, spec


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client signed in to the dashboard as the system admin (the session cookie)."""
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as c:
        yield c


async def test_the_timeline_pages_newest_first_and_the_live_part_follows(
    client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    job = (await client.post("/v1/jobs", json=spec("many", schedule={"kind": "manual"}))).json()
    answer = await client.post(f"/v1/jobs/{job['id']}/runs", json={"payloads": [None] * 30})
    ids = answer.json()["run_ids"]
    first = await browser.get(f"/ui/jobs/{job['id']}")
    assert first.status_code == 200, first.text
    shown = [int(i) for i in re.findall(r"Run #(\d+)<", first.text)]
    assert shown == sorted(ids, reverse=True)[:25]
    [older] = re.findall(r'href="([^"]+)" rel="next">Older runs', first.text)
    rest = await browser.get(older.replace("&amp;", "&"))
    assert [int(i) for i in re.findall(r"Run #(\d+)<", rest.text)] == sorted(ids, reverse=True)[25:]
    assert "Newest runs" in rest.text and "Older runs" not in rest.text
    cursor = older.split("cursor=")[1].split("#")[0]
    live = await browser.get(f"/ui/live/jobs/{job['id']}/runs?cursor={cursor}")
    assert live.status_code == 200 and "<html" not in live.text
    assert "Run #" + str(min(ids)) in live.text


async def test_a_pool_without_a_live_worker_is_a_notice(
    client: httpx.AsyncClient, browser: httpx.AsyncClient
) -> None:
    job = (await client.post("/v1/jobs", json=spec("lonely", pool="nowhere"))).json()
    page = await browser.get(f"/ui/jobs/{job['id']}")
    assert "Needs attention" in page.text and "no_live_worker" in page.text


async def test_refusals_are_pages(browser: httpx.AsyncClient) -> None:
    bad = await browser.get("/ui/jobs", params={"outcome": "failed"})
    assert bad.status_code == 422 and "outcome" in bad.text and "<html" in bad.text
    cursor = await browser.get("/ui/jobs", params={"cursor": "nope"})
    assert cursor.status_code == 422
    unknown = "01a20e61-9ff4-7000-8a48-85eaf00178b5"
    assert (await browser.get(f"/ui/jobs/{unknown}")).status_code == 404
    assert (await browser.get(f"/ui/live/jobs/{unknown}/runs")).status_code == 404
    assert (await browser.get("/ui/jobs/not-an-id")).status_code == 404
