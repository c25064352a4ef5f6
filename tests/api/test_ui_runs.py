"""The runs pages' server side, without a browser, on both stores: the dead-letter
page's filters and cursor, and the run page's answers to ids that name no run."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.core.model import RetryPolicy
from cronwheel.dashboard.pages import runs as pages
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_job
from cronwheel.store.conformance.history.dead_list import dead_run
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN


def _browser(app: FastAPI) -> httpx.AsyncClient:
    """A client that is signed in to the dashboard as the admin (the session cookie)."""
    return connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN})


def _run_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<a href="/ui/runs/(\d+)">', html)]


async def test_the_dead_letter_is_filtered_by_pool_job_and_age(app: FastAPI, store: Store) -> None:
    now = datetime.now(UTC)
    mail = make_job("mail", pool="email", retry=RetryPolicy(max_attempts=1))
    report = make_job("report", pool="reports", retry=RetryPolicy(max_attempts=1))
    await store.create_jobs([mail, report])
    old = await dead_run(store, mail, 0, ["Old"], base=now - timedelta(days=3))
    new = await dead_run(store, mail, 0, ["New"], base=now - timedelta(minutes=5))
    other = await dead_run(store, report, 0, ["Other"], base=now - timedelta(minutes=5))
    async with _browser(app) as ui:
        everything = await ui.get("/ui/dead")
        assert everything.status_code == 200
        assert _run_ids(everything.text) == [other, new, old]
        assert "OldError" in everything.text  # each row's last error, from the same read
        assert _run_ids((await ui.get("/ui/dead?pool=email")).text) == [new, old]
        assert _run_ids((await ui.get("/ui/dead?job=report")).text) == [other]
        assert _run_ids((await ui.get(f"/ui/dead?job={mail.id}")).text) == [new, old]
        assert _run_ids((await ui.get("/ui/dead?since=24h")).text) == [other, new]
        assert _run_ids((await ui.get("/ui/dead?since=nonsense")).text) == [other, new, old]
        unknown = await ui.get("/ui/dead?job=nope")
        assert _run_ids(unknown.text) == [] and "No job is named" in unknown.text


async def test_the_dead_letter_pages_with_a_cursor(
    app: FastAPI, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "DEAD_PAGE", 2)
    job = make_job("paged", retry=RetryPolicy(max_attempts=1))
    await store.create_jobs([job])
    ids = [await dead_run(store, job, n * 10, ["E"]) for n in range(3)]
    async with _browser(app) as ui:
        first = await ui.get("/ui/dead?job=paged")
        assert _run_ids(first.text) == [ids[2], ids[1]]
        [older] = re.findall(r'<a href="(/ui/dead\?[^"]+)" rel="next">', first.text)
        second = await ui.get(older.replace("&amp;", "&"))
        assert _run_ids(second.text) == [ids[0]]
        assert 'rel="next"' not in second.text
        bad = await ui.get("/ui/dead?cursor=bm90LWEtY3Vyc29y")
        assert bad.status_code == 422 and "cursor" in bad.text


async def test_a_run_page_is_not_found_for_ids_that_name_no_run(app: FastAPI, store: Store) -> None:
    job = make_job(retry=RetryPolicy(max_attempts=1))
    await store.create_jobs([job])
    run_id = await dead_run(store, job, 0, ["E"])
    async with _browser(app) as ui:
        page = await ui.get(f"/ui/runs/{run_id}")
        assert page.status_code == 200 and "EError" in page.text
        assert f'data-action="POST /v1/runs/{run_id}/replay"' in page.text
        assert "data-live" not in page.text  # a dead run does not change by itself
        spellings = (
            f"0{run_id}",
            f"+{run_id}",
            f"%20{run_id}",
            f"{run_id}.0",
            chr(0x0660 + run_id),
        )
        for wrong in ("0", "abc", str(2**63), str(run_id + 1000), *spellings):
            missing = await ui.get(f"/ui/runs/{wrong}")
            assert missing.status_code == 404, wrong
            assert "Not found" in missing.text
        live = await ui.get(f"/ui/live/runs/{run_id}")
        assert live.status_code == 200 and "<html" not in live.text
