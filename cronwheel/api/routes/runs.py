"""``/v1/runs`` and ``/v1/dead-letter``: read a run with its attempts, cancel it, replay
dead runs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BeforeValidator

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import DeadReplayIn
from cronwheel.api.openapi import problems
from cronwheel.core.ids import INT64, checked_job_id, run_id_text
from cronwheel.errors import Conflict, NotFound
from cronwheel.web.auth import Principal, Reader, Writer
from cronwheel.web.pagination import DEFAULT_LIMIT, Cursor, Limit, before_run, page
from cronwheel.web.problems import invalid
from cronwheel.web.schemas import Page, ReplayedOut, RunDetailOut, RunOut, dump
from cronwheel.web.state import api_state

router = APIRouter(tags=["runs"], route_class=GuardedRoute)

# Only ASCII digits name a run (cronwheel.core.ids.RUN_ID): "1.0", "+1", " 1" are 422
# like "abc". The validator comes after Path, so the schema keeps minimum and maximum.
RunId = Annotated[int, Path(ge=1, le=INT64, description="A run id."), BeforeValidator(run_id_text)]
REPLAY_PAGE = 1000


@router.get(
    "/v1/runs/{run_id}",
    response_model=RunDetailOut,
    responses=problems(404),
    summary="Read a run and its attempts",
)
async def get_run(run_id: RunId, request: Request, principal: Reader) -> Any:
    state = api_state(request)
    service = state.service(principal)
    run = await service.run(run_id, tenant_id=principal.tenant_id)
    attempts = await service.store.list_attempts(principal.tenant_id, run_id)
    notices = await state.notices.for_run(run)
    return dump(RunDetailOut.with_attempts(run, attempts, notices))


@router.post(
    "/v1/runs/{run_id}/cancel",
    response_model=RunOut,
    responses=problems(404),
    summary="Cancel a run",
)
async def cancel_run(run_id: RunId, request: Request, principal: Writer) -> Any:
    """A pending run is cancelled at once; a running one is asked to stop (its worker
    sees it at its next heartbeat). Idempotent: a finished run, or a running one already
    asked to stop, answers 200 with the run unchanged."""
    service = api_state(request).service(principal)
    return dump(RunOut.of(await service.cancel_run(run_id, tenant_id=principal.tenant_id)))


@router.post(
    "/v1/runs/{run_id}/replay",
    response_model=RunOut,
    responses=problems(404, 409, 429),
    summary="Replay a dead run",
)
async def replay_run(run_id: RunId, request: Request, principal: Writer) -> Any:
    """Back to pending with a fresh retry budget: same run, same idempotency key. Counts
    against the tenant's ``max_creates_per_second`` (429 above it)."""
    state = api_state(request)
    await state.quotas.admit_runs(principal.tenant_id, 1)
    service = state.service(principal)
    replayed = await service.replay([run_id], tenant_id=principal.tenant_id)
    run = await service.run(run_id, tenant_id=principal.tenant_id)
    if not replayed:
        raise Conflict("state", f"the run is {run.state.value}; only a dead run can be replayed")
    return dump(RunOut.of(run))


@router.get(
    "/v1/dead-letter",
    response_model=Page[RunOut],
    responses=problems(),
    summary="Dead runs, newest first",
)
async def dead_letter(
    request: Request,
    principal: Reader,
    job_id: Annotated[str | None, Query(max_length=64)] = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Any:
    try:
        job = None if job_id is None else checked_job_id(job_id)
    except NotFound:
        return {"items": [], "next_cursor": None}  # no such job: nothing of it is dead
    runs = (
        await api_state(request)
        .service(principal)
        .dead_letter(
            tenant_id=principal.tenant_id, job_id=job, before_id=before_run(cursor), limit=limit + 1
        )
    )
    items, next_cursor = page(runs, limit, "run", "id")
    return {"items": [dump(RunOut.of(r)) for r in items], "next_cursor": next_cursor}


@router.post(
    "/v1/dead-letter/replay",
    response_model=ReplayedOut,
    responses=problems(404, 429),
    summary="Replay dead runs",
)
async def replay_dead(body: DeadReplayIn, request: Request, principal: Writer) -> Any:
    """By id (``run_ids``), or every dead run of one job (``job_id`` with ``all: true``).
    Runs that are not dead (or not this tenant's) are left alone and not listed. The
    runs asked for count against the tenant's ``max_creates_per_second`` (429 above it)."""
    service = api_state(request).service(principal)
    if body.run_ids is not None and body.job_id is None and not body.all:
        run_ids = body.run_ids
    elif body.run_ids is None and body.job_id is not None and body.all:
        run_ids = await _dead_of_job(principal, request, checked_job_id(body.job_id))
    else:
        raise invalid("run_ids", 'give either "run_ids", or "job_id" with "all": true')
    await api_state(request).quotas.admit_runs(principal.tenant_id, len(run_ids))
    return {"replayed": await service.replay(run_ids, tenant_id=principal.tenant_id)}


async def _dead_of_job(principal: Principal, request: Request, job_id: str) -> list[int]:
    service = api_state(request).service(principal)
    await service.get(job_id, tenant_id=principal.tenant_id)  # 404 for an unknown job
    found: list[int] = []
    before: int | None = None
    while True:
        runs = await service.dead_letter(
            tenant_id=principal.tenant_id, job_id=job_id, before_id=before, limit=REPLAY_PAGE
        )
        found += [r.id for r in runs]
        if len(runs) < REPLAY_PAGE:
            return found
        before = runs[-1].id
