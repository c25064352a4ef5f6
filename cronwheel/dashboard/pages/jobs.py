"""The jobs pages: the list of a tenant's jobs (search, filters, order, bulk pause, resume
and cancel) and one job's page (its definition in words, its next fire times with their
UTC offsets and DST marks, and its runs as a live timeline).

Reads go through the same service calls as ``GET /v1/jobs`` and ``GET /v1/jobs/{id}``
with the same filters and cursors, so the page and the API never disagree; changes are
buttons that call the JSON API (see ``static/ui.js``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.core.ids import checked_job_id
from cronwheel.core.model import Job, JobOrder, JobState, LastOutcome, Run, RunState
from cronwheel.dashboard.live import shared_reads
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.errors import InvalidInput
from cronwheel.schedule.codec import schedule_from_dict
from cronwheel.schedule.preview import Fire, upcoming
from cronwheel.schedule.words import describe
from cronwheel.security.redact import mask_action
from cronwheel.web.notices import Notice
from cronwheel.web.pagination import MAX_CURSOR, MAX_LIMIT, after_job, before_run, job_cursor
from cronwheel.web.pagination import page as cut_page
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)

LIST_LIMIT = 50
"""Jobs per page of the list (``?limit=`` changes it, up to the API's maximum)."""
RUNS_LIMIT = 25
"""Runs per page of a job's timeline."""
FIRES = 10
"""Upcoming fire times a job's page shows."""
KINDS = ("cron", "interval", "once", "delay", "immediate", "manual")
ORDERS = {
    "created": "Oldest first",
    "-created": "Newest first",
    "name": "Name, A to Z",
    "-name": "Name, Z to A",
    "next_fire": "Next fire, soonest first",
    "-next_fire": "Next fire, latest first",
}
"""The orders of ``GET /v1/jobs``, each a walk of an index with its own cursor (see
docs/decisions/0024-jobs-list-order.md), as the order menu and the caption say them."""


@dataclass(frozen=True, slots=True)
class SortHeader:
    """A column header that sorts the list: a link to the list in this column's order
    (the other way round if it is sorted so already), the filters kept, back to the
    first page; ``aria_sort`` says how the column is sorted now, if it is."""

    label: str
    href: str
    aria_sort: str | None
    next_label: str
    """What following the link does, for a screen reader: the link's hidden text."""


def _schedule_words(schedule: Mapping[str, Any]) -> str:
    """A schedule in words: the one place the pages describe a schedule."""
    try:
        return describe(schedule_from_dict(schedule))
    except (ValueError, TypeError, ArithmeticError):  # stored by a newer version
        return json.dumps(dict(schedule), sort_keys=True)


# -- the list ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ListQuery:
    """The list's filters, order and page, as the page's query string gives them."""

    q: str = ""
    state: str = ""
    pool: str = ""
    kind: str = ""
    outcome: str = ""
    order: str = "created"
    cursor: str = ""
    limit: int = LIST_LIMIT

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> ListQuery:
        """The query of ``params``; InvalidInput (a 422 page) naming a bad field."""
        query = cls(
            q=params.get("q", "").strip()[:200],
            state=params.get("state", ""),
            pool=params.get("pool", "").strip()[:64],
            kind=params.get("kind", ""),
            outcome=params.get("outcome", ""),
            order=params.get("order", "") or "created",
            cursor=params.get("cursor", "")[:MAX_CURSOR],
            limit=_limit(params.get("limit", "")),
        )
        choices = {
            "state": [s.value for s in JobState],
            "kind": list(KINDS),
            "outcome": [o.value for o in LastOutcome],
            "order": list(ORDERS),
        }
        for name, allowed in choices.items():
            value = getattr(query, name)
            if value and value not in allowed:
                raise InvalidInput(name, f"{value!r} is not one of {', '.join(allowed)}")
        return query

    def filters(self) -> dict[str, Any]:
        """The store's filters for this query (what ``GET /v1/jobs`` passes)."""
        return {
            "name_prefix": self.q or None,
            "state": JobState(self.state) if self.state else None,
            "pool": self.pool or None,
            "schedule_kind": self.kind or None,
            "last_outcome": LastOutcome(self.outcome) if self.outcome else None,
            "order": JobOrder(self.order),
        }

    def link(self, **changes: Any) -> str:
        """``/ui/jobs`` with this query's filters, and ``changes``; empty values left out."""
        values = {
            "q": self.q,
            "state": self.state,
            "pool": self.pool,
            "kind": self.kind,
            "outcome": self.outcome,
            "order": "" if self.order == "created" else self.order,
            "limit": "" if self.limit == LIST_LIMIT else str(self.limit),
            "cursor": "",
        } | {k: str(v) for k, v in changes.items()}
        shown = {k: v for k, v in values.items() if v}
        return "/ui/jobs" + ("?" + urlencode(shown) if shown else "")

    def sort_header(self, label: str, key: str) -> SortHeader:
        """The header of the column sorted by ``key`` (``name``, ``next_fire``)."""
        sorted_now = self.order.removeprefix("-") == key
        descending = self.order.startswith("-")
        # A click on a sorted column reverses it; on another, sorts it ascending.
        target = f"-{key}" if sorted_now and not descending else key
        aria = ("descending" if descending else "ascending") if sorted_now else None
        return SortHeader(label, self.link(order=target), aria, f"sort: {ORDERS[target]}")

    @property
    def filtered(self) -> bool:
        return any((self.q, self.state, self.pool, self.kind, self.outcome))


def _limit(text: str) -> int:
    if not text:
        return LIST_LIMIT
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise InvalidInput("limit", f"expected a number of jobs from 1 to {MAX_LIMIT}")
    return int(text)


@dataclass(frozen=True, slots=True)
class JobRow:
    job: Job
    schedule: str


@router.get("/ui/jobs")
async def jobs_list(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    query = ListQuery.parse(request.query_params)
    state = api_state(request)
    order = JobOrder(query.order)
    jobs = await state.service(viewer.principal).list_jobs(
        tenant_id=viewer.tenant_id,
        after=after_job(query.cursor or None, order),
        limit=query.limit + 1,
        **query.filters(),
    )
    shown = jobs[: query.limit]
    next_cursor = job_cursor(order, shown[-1]) if len(jobs) > query.limit else None
    return page(
        request,
        viewer,
        "jobs.html",
        title="Jobs",
        query=query,
        rows=[JobRow(j, _schedule_words(j.schedule)) for j in shown],
        next_link=query.link(cursor=next_cursor) if next_cursor else None,
        first_link=query.link() if query.cursor else None,
        states=[s.value for s in JobState],
        kinds=KINDS,
        outcomes=[o.value for o in LastOutcome],
        orders=ORDERS,
        sort_headers={
            "name": query.sort_header("Name", "name"),
            "next_fire": query.sort_header("Next fire", "next_fire"),
        },
        can_write=viewer.can("write"),
    )


# -- one job -------------------------------------------------------------------------------
DST_MARKS: Mapping[str, str] = {
    "moved": "its wall time does not exist (clocks spring forward): it fires when the gap ends",
    "shifted": "its wall time does not exist (clocks spring forward): it fires with the"
    " offset before the change, as far past the gap as it was into it",
    "merged": "several of its wall times fall on this one instant around a DST change: it"
    " fires once",
    "repeated": "its wall time happens twice (clocks fall back): it fires at both",
}
GAP_POLICIES: Mapping[str, str] = {
    "gap_end": "a time in a spring-forward gap fires when the gap ends (Debian cron; a job"
    " with * in its minute or hour skips it)",
    "skip": "a time in a spring-forward gap is skipped",
    "shift": "a time in a spring-forward gap fires with the offset before the change",
}
OVERLAP_POLICIES: Mapping[str, str] = {
    "first": "a time repeated when clocks fall back fires once, the first time (Debian"
    " cron; a job with * in its minute or hour fires both times)",
    "last": "a time repeated when clocks fall back fires once, the second time",
    "both": "a time repeated when clocks fall back fires both times",
}


@dataclass(frozen=True, slots=True)
class FireRow:
    """One upcoming fire time as the page shows it."""

    fire: Fire
    local: str
    utc: str
    marks: list[str]


def _fire_rows(fires: Sequence[Fire]) -> list[FireRow]:
    out: list[FireRow] = []
    previous: Fire | None = None
    for fire in fires:
        marks = []
        if fire.dst is not None:
            marks.append(f"{fire.dst}: {DST_MARKS.get(fire.dst, fire.dst)}")
        if fire.offset_changed and previous is not None:
            marks.append(
                f"offset changed from {previous.offset} to {fire.offset} since the last fire"
            )
        zone = fire.local.tzname() or ""
        abbreviation = f" {zone}" if zone and not zone.startswith(("+", "-", "UTC")) else ""
        out.append(
            FireRow(
                fire,
                local=f"{fire.local:%a %Y-%m-%d %H:%M:%S} {fire.offset}{abbreviation}",
                utc=f"{fire.at:%Y-%m-%d %H:%M:%S} UTC",
                marks=marks,
            )
        )
        previous = fire
    return out


def _upcoming(job: Job) -> tuple[list[FireRow], str | None]:
    """The next fire times, or why there are none."""
    if job.state is not JobState.ACTIVE:
        why = {
            JobState.PAUSED: "Paused: no fire until it is resumed (from then on, per its"
            " misfire policy).",
            JobState.COMPLETED: "Completed: it fires no more.",
            JobState.CANCELLED: "Cancelled: it fires no more.",
        }
        return [], why[job.state]
    if job.next_fire_at is None:
        if job.schedule.get("kind") == "manual":
            return [], "Manual: it runs only when triggered or enqueued to."
        return [], "No fire is planned."
    try:
        schedule = schedule_from_dict(job.schedule)
    except InvalidInput as exc:  # a schedule stored by an older version, say
        return [], f"Its schedule cannot be read: {exc}"
    return _fire_rows(upcoming(schedule, job.next_fire_at, FIRES)), None


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run of the timeline: its state as a person reads it."""

    run: Run
    badge: str
    label: str
    detail: str
    started_after: float | None
    took: float | None


def _seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max((end - start).total_seconds(), 0.0)


def run_row(run: Run) -> RunRow:
    """How a run reads in a timeline: a retried run says so, a skipped one says why."""
    state, attempt = run.state, run.attempt
    detail = run.reason or ""
    badge, label = state.value, state.value
    if state is RunState.PENDING and attempt > 0:
        badge, label = "failed", "failed, will retry"
        detail = f"attempt {attempt} of {run.max_attempts} failed" + (
            f": {run.last_error}" if run.last_error else ""
        )
    elif state is RunState.RUNNING and attempt > 1:
        label = f"running (retry, attempt {attempt} of {run.max_attempts})"
    elif state is RunState.SUCCEEDED and attempt > 1:
        label = f"succeeded after {attempt} attempts"
    elif state is RunState.DEAD:
        detail = "; ".join(x for x in (run.reason, run.last_error) if x)
    elif state is RunState.SKIPPED and not detail:
        detail = "skipped"
    return RunRow(
        run,
        badge=badge,
        label=label,
        detail=detail,
        started_after=_seconds_between(run.scheduled_for, run.started_at),
        took=_seconds_between(run.started_at, run.finished_at),
    )


async def _timeline(request: Request, viewer: Viewer, job_id: str, cursor: str) -> dict[str, Any]:
    """A page of the job's runs, newest first, read once a second whatever the tabs."""
    state = api_state(request)
    before = before_run(cursor or None)

    async def read() -> dict[str, Any]:
        runs = await state.service(viewer.principal).runs(
            job_id, tenant_id=viewer.tenant_id, before_id=before, limit=RUNS_LIMIT + 1
        )
        shown, next_cursor = cut_page(runs, RUNS_LIMIT, "run", "id")
        return {
            "runs": [run_row(r) for r in shown],
            "next_cursor": next_cursor,
            "now": state.clock.now(),
        }

    key = f"job-runs:{viewer.tenant_id}:{job_id}:{cursor}"
    result: dict[str, Any] = await shared_reads(request).get(key, read)
    return result


def _timeline_context(job_id: str, cursor: str, timeline: Mapping[str, Any]) -> dict[str, Any]:
    live = f"/ui/live/jobs/{job_id}/runs" + (f"?{urlencode({'cursor': cursor})}" if cursor else "")
    more = timeline["next_cursor"]
    return {
        **timeline,
        "job_id": job_id,
        "live_url": live,
        "older_link": f"/ui/jobs/{job_id}?{urlencode({'cursor': more})}#runs" if more else None,
        "newest_link": f"/ui/jobs/{job_id}#runs" if cursor else None,
    }


def _policies(job: Job) -> list[tuple[str, str]]:
    retry = job.retry
    tries = f"up to {retry.max_attempts} attempt{'s' if retry.max_attempts != 1 else ''}"
    if retry.max_attempts > 1:
        tries += (
            f", {retry.backoff.value.replace('_', ' ')} backoff from {retry.initial_delay:g} s"
            f" to {retry.max_delay:g} s"
        )
    if retry.budget_seconds is not None:
        tries += f", within {retry.budget_seconds:g} s in all"
    misfire = {
        "fire_once": "a missed time fires once, late",
        "skip": "missed times are skipped",
        "backfill": f"every missed time fires, at most {job.misfire.limit}",
        "fire_last": f"the last {job.misfire.limit} missed times fire",
    }.get(job.misfire.mode.value, job.misfire.mode.value)
    overlap = {
        "allow": "runs may overlap",
        "skip": "a run due while another runs is skipped",
        "queue": "a run due while another runs waits for it",
        "replace": "a run due while another runs cancels that one",
    }.get(job.overlap.value, job.overlap.value)
    return [
        ("Retry", tries),
        ("Timeout", f"{job.timeout_seconds:g} s per attempt"),
        ("Misfire", f"{job.misfire.mode.value}: {misfire}"),
        ("Catch-up window", f"{job.catchup_seconds:g} s: later than that, a time has misfired"),
        ("Overlap", f"{job.overlap.value}: {overlap}"),
        ("Jitter", f"up to {job.jitter_seconds:g} s" if job.jitter_seconds else "none"),
        ("Delivery", job.delivery.value.replace("_", "-")),
        ("Priority", job.priority.name.lower()),
    ]


def _zone_facts(schedule: Mapping[str, Any]) -> list[tuple[str, str]]:
    if schedule.get("kind") != "cron":
        return [("Time zone", "UTC (only cron schedules are read in a zone)")]
    gap = str(schedule.get("dst_gap", "gap_end"))
    overlap = str(schedule.get("dst_overlap", "first"))
    return [
        ("Time zone", str(schedule.get("timezone", "UTC"))),
        ("DST gap", f"{gap}: {GAP_POLICIES.get(gap, gap)}"),
        ("DST overlap", f"{overlap}: {OVERLAP_POLICIES.get(overlap, overlap)}"),
    ]


@router.get("/ui/jobs/{job_id}")
async def job_page(job_id: str, request: Request, viewer: CurrentViewer) -> HTMLResponse:
    state = api_state(request)
    job = await state.service(viewer.principal).get(
        checked_job_id(job_id), tenant_id=viewer.tenant_id
    )
    notices: list[Notice] = await state.notices.for_job(job)
    cursor = request.query_params.get("cursor", "")[:200]
    fires, no_fires = _upcoming(job)
    timeline = await _timeline(request, viewer, job.id, cursor)
    return page(
        request,
        viewer,
        "job.html",
        title=f"Job {job.name}",
        job=job,
        schedule=_schedule_words(job.schedule),
        zone=_zone_facts(job.schedule),
        zone_name=job.schedule.get("timezone", "UTC")
        if job.schedule.get("kind") == "cron"
        else "UTC",
        action=mask_action(job.action),
        policies=_policies(job),
        notices=notices,
        fires=fires,
        no_fires=no_fires,
        can_write=viewer.can("write"),
        **_timeline_context(job.id, cursor, timeline),
    )


@router.get("/ui/live/jobs/{job_id}/runs")
async def job_runs_live(job_id: str, request: Request, viewer: CurrentViewer) -> HTMLResponse:
    cursor = request.query_params.get("cursor", "")[:200]
    timeline = await _timeline(request, viewer, checked_job_id(job_id), cursor)
    return fragment("job_runs.html", **_timeline_context(job_id, cursor, timeline))
