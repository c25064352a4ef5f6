"""The runs pages: one run with its attempts (live while it is pending or running), and
the dead-letter queue with its filters and bulk replay.

Reads go through the same service and store calls as ``/v1/runs`` and
``/v1/dead-letter``; cancel and replay are buttons that call those endpoints."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.core.ids import is_run_id
from cronwheel.core.model import Attempt, Job, JobState, Run
from cronwheel.core.records import DeadRun
from cronwheel.dashboard.live import shared_reads
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.errors import NotFound
from cronwheel.web.pagination import before_run, encode
from cronwheel.web.schemas import AttemptOut, RunOut
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)

DEAD_PAGE = 50
SINCE: dict[str, tuple[str, timedelta | None]] = {
    "": ("Any time", None),
    "1h": ("Last hour", timedelta(hours=1)),
    "24h": ("Last 24 hours", timedelta(days=1)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "30d": ("Last 30 days", timedelta(days=30)),
}
"""The "died since" choices: a window back from now, so no time zone is involved."""


def _run_id(text: str) -> int:
    """A run id from a URL; anything else names no run (the 404 page)."""
    if not is_run_id(text):
        raise NotFound("run", text)
    return int(text)


@dataclass(frozen=True, slots=True)
class AttemptRow:
    """An attempt as the table shows it: the API's fields, plus its duration and the
    HTTP status a webhook target answered (None when not recorded)."""

    attempt: AttemptOut
    duration: float | None
    http_status: int | None


def _attempt_row(attempt: Attempt) -> AttemptRow:
    out = AttemptOut.of(attempt)
    duration = None
    if attempt.started_at is not None:
        duration = max((attempt.finished_at - attempt.started_at).total_seconds(), 0.0)
    return AttemptRow(out, duration, attempt.http_status)


async def _run_facts(
    request: Request, viewer: Viewer, run_id: int, *, shared: bool
) -> dict[str, Any]:
    """The run, its job and its attempts: as of this second for a live refresh
    (``shared``: one read for every tab), fresh for a page load, which follows a
    person's click (a replay's reload must not show the run as it was before the
    replay, and a finished run's page does not refresh)."""
    state = api_state(request)

    async def read() -> dict[str, Any]:
        service = state.service(viewer.principal)
        run = await service.run(run_id, tenant_id=viewer.tenant_id)
        job = await state.store.get_job(viewer.tenant_id, run.job_id)
        attempts = await state.store.list_attempts(viewer.tenant_id, run_id)
        return {"run": run, "job": job, "attempts": [_attempt_row(a) for a in attempts]}

    key = f"run:{viewer.tenant_id}:{run_id}"
    facts: dict[str, Any] = await (shared_reads(request).get(key, read) if shared else read())
    run: Run = facts["run"]
    job: Job | None = facts["job"]
    payload = run.payload if run.payload is not None else (job.payload if job else None)
    return {
        **facts,
        "out": RunOut.of(run),
        "payload": payload,
        "own_payload": run.payload is not None,
        "live": not run.state.finished,
        "can_write": viewer.can("write"),
    }


@router.get("/ui/runs/{run_id}")
async def run_page(run_id: str, request: Request, viewer: CurrentViewer) -> HTMLResponse:
    facts = await _run_facts(request, viewer, _run_id(run_id), shared=False)
    return page(request, viewer, "run.html", title=f"Run {facts['run'].id}", **facts)


@router.get("/ui/live/runs/{run_id}")
async def run_live(run_id: str, request: Request, viewer: CurrentViewer) -> HTMLResponse:
    facts = await _run_facts(request, viewer, _run_id(run_id), shared=True)
    return fragment("run_live.html", **facts)


@dataclass(frozen=True, slots=True)
class DeadFilters:
    """What the dead-letter page was asked to show, as its form holds it."""

    pool: str = ""
    job: str = ""
    since: str = ""

    def query(self, cursor: str | None = None) -> str:
        pairs = (("pool", self.pool), ("job", self.job), ("since", self.since))
        kept = [(k, v) for k, v in pairs if v]
        if cursor:
            kept.append(("cursor", cursor))
        return urlencode(kept)


async def _job_filter(request: Request, viewer: Viewer, text: str) -> tuple[str | None, str | None]:
    """The job id a "job" filter names (an id, or a name), and a note when none."""
    store = api_state(request).store
    job = await store.get_job(viewer.tenant_id, text)
    if job is not None:
        return job.id, None
    named = await store.list_jobs(viewer.tenant_id, name=text, limit=100)
    if not named:
        return None, f"No job is named or has the id “{text}”."
    # A live job's name is unique; cancelled ones may share it: the live one, else the
    # newest (ids are time-ordered).
    live = [j for j in named if j.state is not JobState.CANCELLED]
    return (live or named)[-1].id, None


@router.get("/ui/dead")
async def dead_letter(
    request: Request,
    viewer: CurrentViewer,
    pool: str = "",
    job: str = "",
    since: str = "",
    cursor: str | None = None,
) -> HTMLResponse:
    state = api_state(request)
    filters = DeadFilters(pool.strip()[:200], job.strip()[:200], since if since in SINCE else "")
    note = None
    job_id = None
    if filters.job:
        job_id, note = await _job_filter(request, viewer, filters.job)
    window = SINCE[filters.since][1]
    rows: list[DeadRun] = []
    next_cursor = None
    if note is None:
        found = await state.store.list_dead(
            viewer.tenant_id,
            pool=filters.pool or None,
            job_id=job_id,
            died_since=None if window is None else state.clock.now() - window,
            before_id=before_run(cursor or None),
            limit=DEAD_PAGE + 1,
        )
        rows = found[:DEAD_PAGE]
        if len(found) > DEAD_PAGE:
            next_cursor = encode("run", rows[-1].run.id)
    return page(
        request,
        viewer,
        "dead.html",
        title="Dead letter",
        rows=rows,
        filters=filters,
        since_choices=SINCE,
        note=note,
        first_page=cursor is None,
        next_query=None if next_cursor is None else filters.query(next_cursor),
        first_query=filters.query(),
        can_write=viewer.can("write"),
        now=state.clock.now(),
    )
