"""``POST /v1/schedules/preview``: what a schedule will do, before a job has it.

The schedule is the object a job takes, validated by the same code (so a bad one gets
the very errors ``POST /v1/jobs`` would give, naming ``schedule.cron``…); the answer is
its next fire times, each with its wall time in the schedule's zone, its UTC offset and
what DST did to it, and the schedule in words. Nothing is stored.
"""

from __future__ import annotations

from fastapi import APIRouter, Request

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import PreviewIn
from cronwheel.api.openapi import problems
from cronwheel.core.jobspec import check_plannable
from cronwheel.errors import InvalidInput
from cronwheel.schedule import CronSchedule, schedule_from_dict
from cronwheel.schedule.preview import preview
from cronwheel.schedule.words import describe
from cronwheel.web.auth import Reader
from cronwheel.web.problems import FieldError, refine, unprocessable
from cronwheel.web.schemas import FireOut, PreviewOut, dump
from cronwheel.web.state import api_state

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], route_class=GuardedRoute)


@router.post(
    "/preview",
    response_model=PreviewOut,
    responses=problems(),
    summary="Preview a schedule: its next fire times and the schedule in words",
)
async def preview_schedule(body: PreviewIn, request: Request, principal: Reader) -> object:
    """The first ``count`` fire times of a job created now with ``schedule``: UTC, the
    wall time and offset in the schedule's zone, and a DST mark (``moved``, ``shifted``,
    ``merged``, ``repeated``); a ``delay`` counts from now. A schedule a job could not
    have answers 422 exactly as ``POST /v1/jobs`` would."""
    now = api_state(request).clock.now()
    schedule = schedule_from_dict(body.schedule)
    try:
        check_plannable(schedule, now)
        fires = preview(schedule, now, body.count)
    except InvalidInput as exc:  # as jobs._plannable words it
        raise unprocessable([FieldError(*refine(exc.field, exc.reason))]) from None
    except ArithmeticError:
        raise unprocessable([FieldError("schedule", "its occurrences are out of range")]) from None
    zone = schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"
    return dump(
        PreviewOut(
            fires=[
                FireOut(
                    at=f.at,
                    local=f.local,
                    offset=f.offset,
                    dst=f.dst,  # type: ignore[arg-type]
                    offset_changed=f.offset_changed,
                )
                for f in fires
            ],
            description=describe(schedule),
            timezone=zone,
        )
    )
