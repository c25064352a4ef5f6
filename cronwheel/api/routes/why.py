"""``GET /v1/jobs/{id}/why?at=09:00``: why didn't it run at 09:00?

The asked time is read in the job's zone (:mod:`cronwheel.core.why`); the answer names the
occurrence that falls there and its run (state, attempts, reason), or the skip and its
reason, or, when no occurrence falls there, the schedule's fire times around it with
their DST marks; and whether the job was paused, or did not exist yet, at that time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import Field

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.openapi import problems
from cronwheel.api.routes.jobs import JobId
from cronwheel.core.ids import checked_job_id
from cronwheel.core.model import Attempt, AuditEntry, Job, Run, RunState
from cronwheel.core.why import (
    AT_PATTERN,
    DST_NOTES,
    Asked,
    Fire,
    falls_at,
    fires_around,
    latest_asked,
    read_time,
    zone_of,
)
from cronwheel.schedule import schedule_from_dict
from cronwheel.store.base import Store
from cronwheel.web.auth import Reader
from cronwheel.web.schemas import AttemptOut, Instant, RunOut, _Out, dump
from cronwheel.web.state import api_state

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=GuardedRoute)

At = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=64,
        json_schema_extra={"pattern": AT_PATTERN},
        description="`HH:MM` (today in the job's zone) or an ISO 8601 date-time"
        " (read in the job's zone without an offset); left out: the latest occurrence at"
        " or before now (now if there is none).",
    ),
]
LATEST = "latest"
"""What ``asked`` says when no time was given."""
_STATE_ACTIONS = ("created", "paused", "resumed", "cancelled", "completed", "active")


class FireOut(_Out):
    at: Instant = Field(description="In the job's zone.")
    utc: Instant
    dst: str | None = Field(description="moved, shifted, merged, repeated, or null.")
    dst_note: str | None

    @classmethod
    def of(cls, fire: Fire | None) -> FireOut | None:
        if fire is None:
            return None
        note = None if fire.dst is None else DST_NOTES.get(fire.dst)
        return cls(at=fire.at, utc=fire.utc, dst=fire.dst, dst_note=note)


class WhyOut(_Out):
    """What happened, or did not, at one time of a job's schedule."""

    job_id: str
    job_name: str
    timezone: str
    asked: str
    at: Instant = Field(description="The asked time, read in the job's zone.")
    assumed: str = Field(description="How the asked time was read: which day, which zone.")
    verdict: str = Field(
        description="ran, failed, skipped, cancelled, pending, running, not_yet, no_run,"
        " no_occurrence, not_created, paused, completed"
    )
    explanation: list[str] = Field(description="The answer in sentences, most important first.")
    occurrence: FireOut | None = Field(description="The occurrence that falls at that time.")
    previous_fire: FireOut | None
    next_fire: FireOut | None
    run: RunOut | None
    attempts: list[AttemptOut]


@router.get(
    "/{job_id}/why",
    response_model=WhyOut,
    responses=problems(404),
    summary="Why didn't it run at that time?",
)
async def why(job_id: JobId, request: Request, principal: Reader, at: At = None) -> Any:
    """The run of the occurrence at ``at`` (its state, attempts, reason) or why there is
    none: skipped, paused, not created yet, or no occurrence there (with the schedule's
    previous and next fire times around it, DST marked). Without ``at``: the latest
    occurrence at or before now."""
    state = api_state(request)
    job = await state.service(principal).get(checked_job_id(job_id), tenant_id=principal.tenant_id)
    now = state.clock.now()
    schedule = schedule_from_dict(job.schedule)
    if at is None:
        asked = latest_asked(schedule, now, created_at=job.created_at)
    else:
        asked = read_time(at, zone_of(schedule), now)
    before, after = fires_around(schedule, asked.instant, created_at=job.created_at)
    occurrence = next((f for f in (before, after) if falls_at(f, asked)), None)
    run: Run | None = None
    attempts: list[Attempt] = []
    if occurrence is not None:
        found, _ = await state.store.runs_around(job.tenant_id, job.id, occurrence.utc)
        if found is not None and found.scheduled_for == occurrence.utc:
            run = found
            attempts = await state.store.list_attempts(job.tenant_id, found.id)
    audit = await state.store.list_audit(job.tenant_id, job.id)
    held = None
    if run is not None and run.state is RunState.PENDING and run.available_at <= now:
        held = await _held_back(state.store, run, now)
        if held is None:
            held = await _rate_limited(state.store, run.pool)
    verdict, lines = explain(
        job, asked, occurrence, before, after, run, attempts, audit, now, held_back=held
    )
    answer = WhyOut(
        job_id=job.id,
        job_name=job.name,
        timezone=asked.zone,
        asked=LATEST if at is None else at,
        at=asked.instant,
        assumed=asked.assumed,
        verdict=verdict,
        explanation=lines,
        occurrence=FireOut.of(occurrence),
        previous_fire=FireOut.of(before),
        next_fire=FireOut.of(after),
        run=None if run is None else RunOut.of(run),
        attempts=[AttemptOut.of(a) for a in attempts],
    )
    return dump(answer)


async def _held_back(store: Store, run: Run, now: datetime) -> str | None:
    """Why a due run waits for a limit, if one holds it back now: its concurrency key, with
    that many of the key's runs running (decision 0031), or its tenant's max_running, with
    that many runs in flight (decision 0028)."""
    key = run.concurrency_key
    if key is not None and run.concurrency_limit is not None:
        running, lowest = await store.key_running(run.tenant_id, key)
        limit = run.concurrency_limit if lowest is None else min(run.concurrency_limit, lowest)
        if running >= limit:
            return (
                f"It waits for its concurrency key {key!r}: at most {limit} of its tenant's"
                f" runs with that key run at once, and {running} are running; it starts as"
                " they finish."
            )
    tenant_id = run.tenant_id
    tenant = await store.get_tenant(tenant_id)
    if tenant is None or tenant.max_running is None:
        return None
    running = sum(p.running for p in await store.pool_status(tenant_id, now=now, since=now))
    if running < tenant.max_running:
        return None
    return (
        f"It waits for a limit: its tenant may have {tenant.max_running} runs in flight"
        f" at once (max_running), and {running} are running; it starts as they finish."
    )


async def _rate_limited(store: Store, pool: str) -> str | None:
    """Why a due run may wait: its pool's rate limit (decision 0033), if it has one."""
    rate = (await store.pool_rates()).get(pool)
    if rate is None:
        return None
    return (
        f"It may be waiting for a limit: the pool {pool} starts at most {rate:g} runs a"
        " second across the cluster (its rate limit); it starts as the pool's turn comes."
    )


def explain(
    job: Job,
    asked: Asked,
    occurrence: Fire | None,
    before: Fire | None,
    after: Fire | None,
    run: Run | None,
    attempts: Sequence[Attempt],
    audit: Sequence[AuditEntry],
    now: datetime,
    *,
    held_back: str | None = None,
) -> tuple[str, list[str]]:
    """The verdict and the sentences that say it, from what was found; ``held_back``
    says which limit holds a due pending run back, if one does."""
    lines = [asked.assumed + "."]
    if asked.dst_note:
        lines.append(asked.dst_note + ".")
    moment = occurrence.utc if occurrence is not None else asked.instant
    context = _job_context(job, moment, audit)
    if run is not None and occurrence is not None:
        lines.append(_fires_line("The schedule fires at", occurrence))
        verdict, said = _run_lines(run, attempts, now, held_back)
        return verdict, [*lines, *said, *context[1]]
    if occurrence is not None:
        lines.append(_fires_line("The schedule fires at", occurrence))
        if context[0]:
            return context[0], [*lines, *context[1]]
        if occurrence.utc > now:
            return "not_yet", [
                *lines,
                "That is still to come: its run is created shortly before it is due.",
            ]
        return "no_run", [
            *lines,
            "No run was recorded for this occurrence: a misfire policy may have folded it"
            " into a later run, or retention deleted its history.",
        ]
    lines.append(_no_occurrence_line(job, before, after))
    if context[0] == "not_created":
        return "not_created", [*lines, *context[1]]
    return "no_occurrence", [*lines, *context[1]]


def _fires_line(prefix: str, fire: Fire) -> str:
    line = f"{prefix} {fire.at.isoformat()} ({fire.utc.isoformat()} UTC)"
    if fire.dst is not None:
        line += f" [{fire.dst}: {DST_NOTES[fire.dst]}]"
    return line + "."


def _no_occurrence_line(job: Job, before: Fire | None, after: Fire | None) -> str:
    kind = job.schedule.get("kind")
    if kind == "manual":
        return "A manual job never fires by itself: its runs come from trigger and enqueue."
    parts = ["No occurrence of the schedule falls at that time"]
    parts.append(
        "; previous fire: none in the year before"
        if before is None
        else f"; previous fire: {_mark(before)}"
    )
    parts.append("; next fire: none" if after is None else f"; next fire: {_mark(after)}")
    return "".join(parts) + "."


def _mark(fire: Fire) -> str:
    shown = fire.at.isoformat()
    return shown if fire.dst is None else f"{shown} [{fire.dst}: {DST_NOTES[fire.dst]}]"


def _run_lines(
    run: Run, attempts: Sequence[Attempt], now: datetime, held_back: str | None = None
) -> tuple[str, list[str]]:
    tried = f"after {run.attempt} attempt{'s' if run.attempt != 1 else ''}"
    last = attempts[-1] if attempts else None
    if run.state is RunState.SUCCEEDED:
        return "ran", [f"Run {run.id} succeeded at {_time(run.finished_at)} {tried}."]
    if run.state is RunState.DEAD:
        error = f" Last error: {run.last_error}." if run.last_error else ""
        return "failed", [f"Run {run.id} is dead {tried}: {run.reason}.{error}"]
    if run.state is RunState.SKIPPED:
        return "skipped", [f"Run {run.id} was skipped: {run.reason}."]
    if run.state is RunState.CANCELLED:
        why = f": {run.reason}" if run.reason else ""
        return "cancelled", [f"Run {run.id} was cancelled{why}."]
    if run.state is RunState.RUNNING:
        return "running", [f"Run {run.id} is running (attempt {run.attempt})."]
    due = "due since" if run.available_at <= now else "due at"
    said = [f"Run {run.id} is pending, {due} {_time(run.available_at)}."]
    if run.available_at <= now:
        said.append(held_back or f"It waits for a worker of pool {run.pool}: see cronwheel status.")
    if last is not None and last.error_message:
        said.append(f"Its last attempt ({last.outcome.value}) said: {last.error_message}.")
    return "pending", said


def _time(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat()


def _job_context(job: Job, moment: datetime, audit: Sequence[AuditEntry]) -> tuple[str, list[str]]:
    """Whether the job existed and was active at ``moment``: a verdict if that explains
    the missing run ("" if not), and the sentences saying so."""
    if moment < job.created_at:
        return "not_created", [
            f"The job was created at {job.created_at.isoformat()}, after that time."
        ]
    changes = [e for e in audit if e.entity == "job" and e.action in _STATE_ACTIONS]
    earlier = [e for e in changes if e.at <= moment]
    later = [e for e in changes if e.at > moment]
    if earlier and earlier[-1].action == "paused":
        paused = earlier[-1]
        line = f"The job was paused at that time (paused at {paused.at.isoformat()}"
        resumed = next((e for e in later if e.action in ("resumed", "active")), None)
        line += f", resumed at {resumed.at.isoformat()})." if resumed else ", still paused)."
        return "paused", [line]
    if earlier and earlier[-1].action in ("cancelled", "completed"):
        end = earlier[-1]
        return end.action, [f"The job was {end.action} at {end.at.isoformat()}, before that time."]
    return "", []
