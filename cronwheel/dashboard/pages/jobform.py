"""Creating and editing a job: ``/ui/jobs/new`` and ``/ui/jobs/{id}/edit``.

The form is only a way to write a job spec. Its script (static/jobform.js) builds the
JSON and sends it to ``POST /v1/jobs`` (with an Idempotency-Key made for this page load)
or ``PATCH /v1/jobs/{id}`` (with ``If-Match`` the version the page was rendered with), so
a job made here gets exactly the API's validation; the API's field errors are shown next
to their fields. As the schedule is typed, ``POST /v1/schedules/preview`` shows what it
will do. A viewer who may not write gets a 403 page instead of a form that would fail.

A command action's argv is typed as one line; ``POST /ui/jobs/argv`` splits it by the
rule ``cronwheel jobs create --command`` follows (cronwheel.core.commandline, decision
0053), so the form and the CLI cannot disagree about the words a line makes.
"""

from __future__ import annotations

import json
import uuid
import zoneinfo
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse

from cronwheel.core.commandline import join_command_line, split_command_line
from cronwheel.core.ids import checked_job_id
from cronwheel.core.jobspec import JobSpec, spec_of
from cronwheel.core.model import Backoff, Delivery, MisfireMode, Overlap
from cronwheel.dashboard.render import PageRoute, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.schedule import DIALECTS, GAP_POLICIES, OVERLAP_POLICIES
from cronwheel.security.redact import mask_action
from cronwheel.web.problems import ApiProblem
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)

KINDS = {
    "cron": "Cron expression",
    "interval": "Every N seconds",
    "once": "Once, at a time",
    "delay": "Once, after a delay",
    "immediate": "Once, right away",
    "manual": "Manual (only when triggered or enqueued to)",
}
GAPS = {
    "gap_end": "fire when the gap ends (default)",
    "skip": "skip it",
    "shift": "fire with the offset before the change",
}
OVERLAPS = {
    "first": "fire once, the first time (default)",
    "last": "fire once, the second time",
    "both": "fire both times",
}
CHOICES: dict[str, list[tuple[str, str]]] = {
    name: [(v, v.replace("_", " ")) for v in values]
    for name, values in {
        "dialect": list(DIALECTS),
        "priority": ["critical", "high", "normal", "low"],
        "backoff": [b.value for b in Backoff],
        "misfire": [m.value for m in MisfireMode],
        "overlap": [o.value for o in Overlap],
        "delivery": [d.value for d in Delivery],
        "method": ["POST", "GET", "PUT", "PATCH", "DELETE"],
    }.items()
}
SCHEDULE_KEYS = (
    "kind",
    "cron",
    "timezone",
    "dialect",
    "dst_gap",
    "dst_overlap",
    "every_seconds",
    "anchor",
    "at",
    "seconds",
    "start_at",
    "end_at",
)
ACTION_KEYS = (
    "type",
    "name",
    "url",
    "method",
    "headers",
    "body",
    "argv",
    "env",
    "secret_env",
    "cwd",
    "timeout_seconds",
    "permanent_exit_codes",
    "broker",
    "to",
)
ACTION_TYPES = [
    ("handler", "Python handler"),
    ("webhook", "Webhook (HTTP request)"),
    ("command", "Command (a program a worker runs)"),
    ("publish", "Publish (a message to a broker)"),
]
MAX_COMMAND_LINE = 64 * 1024
"""As a command's argv may be (cronwheel.core.jobspec.MAX_ARGV_BYTES)."""
"""Every key a schedule or an action can have: the form has a field for each, empty when
the job's kind has none."""
assert set(GAPS) == set(GAP_POLICIES) and set(OVERLAPS) == set(OVERLAP_POLICIES)


@lru_cache(maxsize=1)
def timezones() -> list[str]:
    """Every IANA zone this machine knows, for the timezone field's suggestions."""
    return sorted(zoneinfo.available_timezones())


def _writer(viewer: Viewer, what: str) -> None:
    if not viewer.can("write"):
        raise ApiProblem(
            403,
            f"Your key may read jobs but not {what} them: sign in with a write or admin key.",
        )


def _new_spec() -> dict[str, Any]:
    """A new job's form: the spec's documented defaults, a cron schedule to start from."""
    defaults = JobSpec.model_validate(
        {
            "name": "new-job",
            "schedule": {"kind": "cron", "cron": "0 9 * * *"},
            "action": {"type": "handler", "name": "handler"},
        }
    ).model_dump(mode="json")
    # Left empty, the job's timeout is the API's default (300 s), or a command's own
    # timeout: prefilled, a command given an hour would be refused as longer than it.
    defaults.update(
        timeout_seconds=None,
        name="",
        schedule={"kind": "cron", "cron": "", "timezone": "UTC"},
        action={"type": "handler", "name": ""},
    )
    return defaults


def _form(
    request: Request, viewer: Viewer, spec: dict[str, Any], *, title: str, **context: Any
) -> HTMLResponse:
    schedule = dict.fromkeys(SCHEDULE_KEYS) | dict(spec["schedule"])
    action = dict.fromkeys(ACTION_KEYS) | dict(spec["action"])
    # A command's argv and env as the form's text fields write them.
    argv = action["argv"] or []
    command_line = join_command_line(argv) if argv else ""
    env_lines = "\n".join(f"{k}={v}" for k, v in (action["env"] or {}).items())
    return page(
        request,
        viewer,
        "jobform.html",
        title=title,
        spec=spec,
        schedule=schedule,
        action=action,
        action_types=ACTION_TYPES,
        command_line=command_line,
        argv=argv,
        env_lines=env_lines,
        kinds=KINDS,
        gaps=GAPS,
        overlaps=OVERLAPS,
        choices=CHOICES,
        zones=timezones(),
        **context,
    )


@router.get("/ui/jobs/new")
async def new_job(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    _writer(viewer, "create")
    return _form(
        request,
        viewer,
        _new_spec(),
        title="New job",
        job=None,
        idempotency_key=str(uuid.uuid4()),
    )


@router.get("/ui/jobs/{job_id}/edit")
async def edit_job(job_id: str, request: Request, viewer: CurrentViewer) -> HTMLResponse:
    _writer(viewer, "change")
    service = api_state(request).service(viewer.principal)
    job = await service.get(checked_job_id(job_id), tenant_id=viewer.tenant_id)
    spec = spec_of(job)
    # Secret headers are shown masked, as the API shows them; the script sends the
    # action only if it was changed, so an untouched form keeps the stored secrets.
    spec["action"] = mask_action(spec["action"])
    return _form(
        request,
        viewer,
        spec,
        title=f"Edit {job.name}",
        job=job,
        idempotency_key="",
    )


@router.post("/ui/jobs/argv")
async def split_line(request: Request, viewer: CurrentViewer) -> JSONResponse:
    """``{"line": "pg_dump -f '/backups/db 1.sql'"}`` → ``{"argv": [...]}``, or a 422
    problem naming ``action.argv`` and why (an open quote, a shell operator). Nothing is
    stored; only the form's script asks, for a viewer who may write jobs."""
    _writer(viewer, "create")
    body = await request.body()
    line = None
    if len(body) <= MAX_COMMAND_LINE + 1024:
        try:
            found = json.loads(body)
        except ValueError:
            found = None
        if isinstance(found, dict) and isinstance(found.get("line"), str):
            line = found["line"]
    if line is None:
        reason = 'expected {"line": "the command line"}, up to 64 KiB'
        return _argv_problem(400, reason)
    try:
        return JSONResponse({"argv": split_command_line(line)})
    except ValueError as exc:
        return _argv_problem(422, str(exc))


def _argv_problem(status: int, reason: str) -> JSONResponse:
    return JSONResponse(
        {
            "title": "The command line cannot be a command's argv",
            "status": status,
            "detail": f"action.argv: {reason}",
            "errors": [{"field": "action.argv", "reason": reason}],
        },
        status_code=status,
        media_type="application/problem+json",
    )
