"""The run page in-process, on both stores: the progress and the last checkpoint a
handler reported, live while the run is running. tests/browser/test_runs.py looks at
it in a browser."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.api import AuthConfig, create_app
from cronwheel.store.base import RunReport, Store
from cronwheel.store.conformance.factories import make_job, make_run
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN

HOUR = timedelta(hours=1)


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


async def _page(app: FastAPI, path: str) -> str:
    async with connect(app, cookies={SESSION_COOKIE: ADMIN_TOKEN}) as tab:
        response: httpx.Response = await tab.get(path)
    assert response.status_code == 200, response.text
    return response.text


async def test_a_running_run_shows_its_progress_and_checkpoint_live(
    app: FastAPI, store: Store
) -> None:
    now = datetime.now(UTC)
    job = make_job("long-import")
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, now), make_run(job, now - HOUR)], [])
    quiet, c = await store.claim_runs(
        "w1", ["default"], limit=2, now=now, prefetch_until=now, lease_seconds=60
    )
    report = RunReport(c.run.id, 0.42, "420 of 1000 rows", '{"row":420,"file":"a.csv"}')
    leases = [(quiet.run.id, quiet.run.fence), (c.run.id, c.run.fence)]
    await store.heartbeat("w1", leases, now=now, lease_seconds=60, reports=[report])
    silent = await _page(app, f"/ui/live/runs/{quiet.run.id}")
    assert "<progress" not in silent and "none reported" in silent and "none stored" in silent
    page = await _page(app, f"/ui/runs/{c.run.id}")
    assert f'data-live="/ui/live/runs/{c.run.id}"' in page  # refreshed while it runs
    live = await _page(app, f"/ui/live/runs/{c.run.id}")
    assert "<html" not in live
    for shown in (page, live):
        assert re.search(r'<progress max="1" value="0\.42"[^>]*>42 %</progress>', shown)
        assert "42 % · 420 of 1000 rows" in shown
        [state] = re.findall(r'<pre class="checkpoint"[^>]*>(.*?)</pre>', shown, re.S)
        assert html.unescape(state) == '{\n  "file": "a.csv",\n  "row": 420\n}'
        assert "the run's next attempt resumes from it" in shown


async def test_the_page_read_after_a_replay_shows_the_run_replayed(
    app: FastAPI, store: Store
) -> None:
    """A page load reads fresh: the reload that follows a person's Replay must not show
    the dead run from the shared one-second cache that live refreshes use (a finished
    run's page does not refresh itself, so it would stay wrong)."""
    from cronwheel.core.model import AttemptOutcome, RunState
    from cronwheel.store.base import Completion

    now = datetime.now(UTC)
    job = make_job("replayed-on-screen")
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, now)], [])
    [c] = await store.claim_runs(
        "w1", ["default"], limit=1, now=now, prefetch_until=now, lease_seconds=60
    )
    dead = Completion(
        c.run.id, c.run.fence, "w1", RunState.DEAD, AttemptOutcome.PERMANENT, now, now,
        reason="permanent",
    )  # fmt: skip
    await store.complete_runs([dead])
    before = await _page(app, f"/ui/runs/{c.run.id}")
    assert "Replay" in before and not re.search(r"\bpending\b", before)
    await store.replay_runs("default", [c.run.id], extra_attempts=1, now=now, actor="alice")
    after = await _page(app, f"/ui/runs/{c.run.id}")
    assert re.search(r"\bpending\b", after) and f'data-live="/ui/live/runs/{c.run.id}"' in after


async def test_a_run_claimed_ahead_shows_it_has_not_started(app: FastAPI, store: Store) -> None:
    # Claimed ahead, its worker has not begun it: no start, and no made-up duration.
    now = datetime.now(UTC)
    job = make_job("claimed-ahead")
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, now)], [])
    [c] = await store.claim_runs(
        "w1", ["default"], limit=1, now=now, prefetch_until=now, lease_seconds=60, started=False
    )
    for shown in (
        await _page(app, f"/ui/runs/{c.run.id}"),
        await _page(app, f"/ui/live/runs/{c.run.id}"),
    ):
        assert "not yet: claimed by its worker, waiting to start" in shown
        assert "No attempt yet." in shown
    async with connect(app, ADMIN_TOKEN) as api:
        got = (await api.get(f"/v1/runs/{c.run.id}")).json()
    assert (got["state"], got["started_at"], got["attempt"]) == ("running", None, 1)
