"""A paused job keeps its ``next_fire_at`` (resume continues from now, per its misfire
policy) but will not fire at it: the dashboard's jobs list and job page say "paused",
never a time, on both stores."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, spec


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


@pytest.fixture
async def ids(app: FastAPI) -> dict[str, str]:
    made: dict[str, str] = {}
    async with connect(app, ADMIN_TOKEN) as api:
        for name in ("still-on", "on-hold"):
            every = {"kind": "interval", "every_seconds": 3600}
            job = await api.post("/v1/jobs", json=spec(name, schedule=every))
            assert job.status_code == 201, job.text
            made[name] = job.json()["id"]
        paused = await api.post(f"/v1/jobs/{made['on-hold']}/pause")
        assert paused.status_code == 200, paused.text
        assert paused.json()["next_fire_at"] is not None  # the API keeps it
    return made


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as c:
        yield c


def _row(page: str, job_id: str) -> str:
    [row] = re.findall(rf'<tr>(?:(?!</tr>).)*/ui/jobs/{job_id}"(?:(?!</tr>).)*</tr>', page, re.S)
    return row


async def test_the_jobs_list_shows_no_next_fire_for_a_paused_job(
    ids: dict[str, str], browser: httpx.AsyncClient
) -> None:
    page = await browser.get("/ui/jobs")
    assert page.status_code == 200, page.text
    paused, active = _row(page.text, ids["on-hold"]), _row(page.text, ids["still-on"])
    assert "<time" not in paused and '<td><span class="muted">paused</span></td>' in paused
    assert "<time" in active  # an active job's next fire is a time


async def test_the_job_page_shows_no_next_fire_for_a_paused_job(
    ids: dict[str, str], browser: httpx.AsyncClient
) -> None:
    page = await browser.get(f"/ui/jobs/{ids['on-hold']}")
    assert page.status_code == 200, page.text
    assert "<dt>Next fire</dt><dd>none while paused</dd>" in page.text
    active = await browser.get(f"/ui/jobs/{ids['still-on']}")
    assert re.search(r"<dt>Next fire</dt><dd><time ", active.text), active.text
