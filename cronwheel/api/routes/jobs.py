"""``/v1/jobs``: create (one or a batch), list, read, change, pause, resume, cancel and
trigger jobs, enqueue runs to a manual job, and list a job's runs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.idempotency import Idempotency, IdempotencyKey
from cronwheel.api.inputs import BackfillIn, BatchIn, EnqueueIn, JobPatch, JobSpec, ResumeIn
from cronwheel.api.openapi import problems
from cronwheel.core.ids import checked_job_id
from cronwheel.core.model import (
    ID_PREFIX_PATTERN,
    Job,
    JobOrder,
    JobState,
    LastOutcome,
    Priority,
    Run,
    RunState,
    id_prefix_range,
)
from cronwheel.errors import InvalidItems
from cronwheel.observability import tracing
from cronwheel.web.auth import Principal, Reader, Writer
from cronwheel.web.pagination import (
    DEFAULT_LIMIT,
    Cursor,
    Limit,
    after_job,
    before_run,
    job_cursor,
    page,
)
from cronwheel.web.problems import ApiProblem, FieldError, invalid, refine, unprocessable
from cronwheel.web.schemas import BackfillOut, JobItems, JobOut, Page, RunIdsOut, RunOut, dump
from cronwheel.web.state import ApiState, api_state

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=GuardedRoute)

JobId = Annotated[str, Path(max_length=64, description="A job id (a UUID).")]
ScheduleKind = Literal["cron", "interval", "once", "delay", "immediate", "manual"]
IF_MATCH_PATTERN = r'^(?:\*|(?:W/)?"[0-9]{1,9}"|[0-9]{1,9})$'
"""What If-Match may say: a version (the ETag, ``"3"``, weak or not, or bare ``3``), or
``*`` for any version."""
_IF_MATCH = re.compile(IF_MATCH_PATTERN)
IfMatch = Annotated[
    str | None,
    # Optional to FastAPI, so that a missing one is 428 (expected_version), not 422; the
    # document says required (cronwheel.api.openapi), as it is.
    Header(
        alias="If-Match",
        max_length=64,
        json_schema_extra={"pattern": IF_MATCH_PATTERN},
        description='The version you edit: its ETag (`"3"`), `3`, or `*` for any version.',
    ),
]


def job_response(body: Any, status: int = 200) -> JSONResponse:
    """A job answer, with its version as the ETag (what PATCH's If-Match names)."""
    headers = {"ETag": f'"{body["version"]}"'}
    if status == 201:
        headers["Location"] = f"/v1/jobs/{body['id']}"
    return JSONResponse(body, status_code=status, headers=headers)


async def job_body(state: ApiState, job: Job) -> Any:
    """A job as JSON, with its notices (e.g. no live worker serves its pool)."""
    return dump(JobOut.of(job, await state.notices.for_job(job)))


async def run_body(state: ApiState, run: Run) -> Any:
    """A run as JSON, with its notices."""
    return dump(RunOut.of(run, await state.notices.for_run(run)))


async def _create(
    request: Request, principal: Principal, specs: list[JobSpec], *, batch: bool
) -> list[Any]:
    """Plan (every refused item named, before the quota is charged or the store is
    reached), admit under the quotas, create: the created jobs as JSON bodies."""
    state = api_state(request)
    tenant = principal.tenant_id
    service = state.service(principal)
    try:
        jobs = service.plan_new(specs, tenant_id=tenant)
    except InvalidItems as exc:
        raise unprocessable(
            [FieldError(*refine(f, why), index=i if batch else None) for i, f, why in exc.items]
        ) from None
    await state.quotas.admit(tenant, len(jobs))
    with tracing.creating_jobs(request.headers, tenant, len(jobs)) as traceparent:
        try:
            jobs = await service.create_planned(jobs, traceparent=traceparent)
        except InvalidItems as exc:  # a publish job's broker, checked against the registry
            raise unprocessable(
                [FieldError(*refine(f, why), index=i if batch else None) for i, f, why in exc.items]
            ) from None
    return [await job_body(state, j) for j in jobs]


@router.post(
    "",
    status_code=201,
    response_model=JobOut,
    responses=problems(409, 429),
    summary="Create a job",
)
async def create_job(
    spec: JobSpec, request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    state = api_state(request)
    idempotency = await Idempotency.begin(request, state, principal.tenant_id, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        [body] = await _create(request, principal, [spec], batch=False)
        replay = await idempotency.remember(201, body)
    return job_response(replay.body, replay.status)


@router.post(
    "/batch",
    status_code=201,
    response_model=JobItems,
    responses=problems(409, 429),
    summary="Create up to 10,000 jobs, all or nothing",
)
async def create_jobs(
    batch: BatchIn, request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    state = api_state(request)
    idempotency = await Idempotency.begin(request, state, principal.tenant_id, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        items = await _create(request, principal, batch.jobs, batch=True)
        replay = await idempotency.remember(201, {"items": items})
    return JSONResponse(replay.body, status_code=replay.status)


@router.get("", response_model=Page[JobOut], responses=problems(), summary="List jobs")
async def list_jobs(
    request: Request,
    principal: Reader,
    state: JobState | None = None,
    pool: Annotated[str | None, Query(max_length=64)] = None,
    name_prefix: Annotated[str | None, Query(max_length=200)] = None,
    name: Annotated[
        str | None, Query(max_length=200, description="Exactly this name (cancelled jobs too).")
    ] = None,
    id_prefix: Annotated[
        str | None,
        Query(
            max_length=36,
            json_schema_extra={"pattern": ID_PREFIX_PATTERN},
            description="Ids starting with these hex digits (dashes optional).",
        ),
    ] = None,
    kind: Annotated[
        ScheduleKind | None, Query(description="Jobs whose schedule is of this kind.")
    ] = None,
    last_outcome: Annotated[
        LastOutcome | None,
        Query(
            description="Jobs whose newest finished run (`last_run`) ended so; `none`: no run"
            " of theirs has finished yet."
        ),
    ] = None,
    order: Annotated[
        JobOrder,
        Query(
            description="`created`: oldest first; `name`: by name (code point order);"
            " `next_fire`: soonest first, jobs that will not fire (paused, finished,"
            " cancelled) last. A leading `-` reverses it. Ties go by id. Keep the order"
            " while following `next_cursor`: a cursor of another order is refused."
        ),
    ] = JobOrder.CREATED,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Jobs in creation order, by name or by next fire time, either way; the cursor
    stays valid while jobs are created. ``name`` and ``id_prefix`` find the job a person
    names by its name or the start of its id."""
    if id_prefix is not None:
        id_prefix_range(id_prefix)  # a 422 naming id_prefix before the store is reached
    after = after_job(cursor, order)
    jobs = (
        await api_state(request)
        .service(principal)
        .list_jobs(
            tenant_id=principal.tenant_id,
            state=state,
            pool=pool,
            name_prefix=name_prefix,
            name=name,
            id_prefix=id_prefix,
            schedule_kind=kind,
            last_outcome=last_outcome,
            order=order,
            after=after,
            limit=limit + 1,
        )
    )
    items = jobs[:limit]
    next_cursor = job_cursor(order, items[-1]) if len(jobs) > limit else None
    api = api_state(request)
    return {"items": [await job_body(api, j) for j in items], "next_cursor": next_cursor}


@router.get("/{job_id}", response_model=JobOut, responses=problems(404), summary="Read a job")
async def get_job(job_id: JobId, request: Request, principal: Reader) -> JSONResponse:
    state = api_state(request)
    job = await state.service(principal).get(checked_job_id(job_id), tenant_id=principal.tenant_id)
    return job_response(await job_body(state, job))


def expected_version(if_match: str | None, *, what: str = "job") -> int | None:
    """The version ``If-Match`` names (None for ``*``: any); 428 if it is missing."""
    if if_match is None:
        raise ApiProblem(
            428,
            f"If-Match is required: send the version you edit (the {what}'s ETag)",
            field="If-Match",
        )
    if _IF_MATCH.fullmatch(if_match) is None:
        raise invalid("If-Match", f'expected a {what} version, e.g. "3" (its ETag), or *')
    value = if_match.removeprefix("W/").strip('"')
    return None if value == "*" else int(value)


@router.patch(
    "/{job_id}",
    response_model=JobOut,
    responses=problems(404, 409, 412, 428),
    summary="Change a job",
)
async def update_job(
    job_id: JobId, patch: JobPatch, request: Request, principal: Writer, if_match: IfMatch = None
) -> JSONResponse:
    """Each field sent replaces the job's value; the version bumps."""
    expected = expected_version(if_match)
    state = api_state(request)
    job = await state.service(principal).update(
        checked_job_id(job_id),
        expected_version=expected,
        tenant_id=principal.tenant_id,
        **patch.changes(),
    )
    return job_response(await job_body(state, job))


@router.delete(
    "/{job_id}", response_model=JobOut, responses=problems(404, 409), summary="Cancel a job"
)
async def cancel_job(job_id: JobId, request: Request, principal: Writer) -> JSONResponse:
    """Soft delete: no new runs, pending runs cancelled, the job kept for audit.
    Idempotent: cancelling a cancelled job answers 200 with it unchanged."""
    state = api_state(request)
    job = await state.service(principal).cancel(
        checked_job_id(job_id), tenant_id=principal.tenant_id
    )
    return job_response(await job_body(state, job))


@router.post(
    "/{job_id}/pause", response_model=JobOut, responses=problems(404, 409), summary="Pause a job"
)
async def pause_job(job_id: JobId, request: Request, principal: Writer) -> JSONResponse:
    """No new runs until resumed. Idempotent: pausing a paused job answers 200 with it
    unchanged (same version); a cancelled job: 409."""
    state = api_state(request)
    job = await state.service(principal).pause(
        checked_job_id(job_id), tenant_id=principal.tenant_id
    )
    return job_response(await job_body(state, job))


@router.post(
    "/{job_id}/resume",
    response_model=JobOut,
    responses=problems(404, 409),
    summary="Resume a paused job",
)
async def resume_job(
    job_id: JobId, request: Request, principal: Writer, body: ResumeIn | None = None
) -> JSONResponse:
    """From now on; with ``catch_up`` the occurrences missed are handed to the misfire
    policy instead of being recorded as skipped. Idempotent: resuming an active job
    answers 200 with it unchanged (same version); a completed or cancelled job: 409."""
    state = api_state(request)
    job = await state.service(principal).resume(
        checked_job_id(job_id),
        catch_up=body is not None and body.catch_up,
        tenant_id=principal.tenant_id,
    )
    return job_response(await job_body(state, job))


@router.post(
    "/{job_id}/trigger",
    status_code=201,
    response_model=RunOut,
    responses=problems(404, 409, 429),
    summary="Run a job now",
)
async def trigger_job(
    job_id: JobId, request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    """A manual run besides the schedule; it counts against the tenant's
    ``max_creates_per_second`` (429 above it)."""
    state = api_state(request)
    idempotency = await Idempotency.begin(request, state, principal.tenant_id, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        # A triggered run is a created run: it counts against max_creates_per_second.
        await state.quotas.admit_runs(principal.tenant_id, 1)
        service = state.service(principal)
        run = await service.trigger(checked_job_id(job_id), tenant_id=principal.tenant_id)
        replay = await idempotency.remember(201, await run_body(state, run))
    location = {"Location": f"/v1/runs/{replay.body['id']}"}
    return JSONResponse(replay.body, status_code=replay.status, headers=location)


@router.post(
    "/{job_id}/backfill",
    response_model=BackfillOut,
    responses=problems(404, 409, 429),
    summary="Give runs to the past occurrences of a range that have none",
)
async def backfill_job(
    job_id: JobId, body: BackfillIn, request: Request, principal: Writer
) -> JSONResponse:
    """A run, due now, for every occurrence of the job's schedule in ``[start, end)``
    that has no run yet: a second backfill of the same range creates nothing (no
    ``Idempotency-Key`` needed), and an occurrence the scheduler fired or skipped keeps
    its run. At most 10,000 occurrences per request (more: 422, backfill in parts);
    ``end`` may not be in the future. The runs are ``low`` priority unless
    ``priority`` says otherwise, count against the tenant's ``max_creates_per_second``,
    and take the job's other policies. The job must be active, with a cron or interval
    schedule (409 otherwise)."""
    state = api_state(request)
    tenant = principal.tenant_id

    async def admit(count: int) -> None:
        await state.quotas.admit_runs(tenant, count)

    done = await state.service(principal).backfill(
        checked_job_id(job_id),
        start=body.start,
        end=body.end,
        priority=Priority[body.priority.upper()],
        tenant_id=tenant,
        admit=admit,
    )
    out = BackfillOut(
        occurrences=done.occurrences, created=done.created, first=done.first, last=done.last
    )
    return JSONResponse(dump(out))


@router.post(
    "/{job_id}/runs",
    status_code=201,
    response_model=RunIdsOut,
    responses=problems(404, 409, 429),
    summary="Enqueue runs to a manual job, up to 10,000, all or nothing",
)
async def enqueue_runs(
    job_id: JobId,
    body: EnqueueIn,
    request: Request,
    principal: Writer,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """One pending run per payload, due now, in the job's pool under its action,
    priority and retry policy; each hands its own payload to the handler (``null``: the
    job's). The job's schedule must be ``{"kind": "manual"}`` and the job active. The
    run ids come back in the order of the payloads. Each payload is up to 256 KiB of
    JSON. The runs count against the tenant's ``max_creates_per_second``, not its
    ``max_jobs``."""
    state = api_state(request)
    tenant = principal.tenant_id
    idempotency = await Idempotency.begin(request, state, tenant, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        job_id = checked_job_id(job_id)
        await state.quotas.admit_runs(tenant, len(body.payloads))
        service = state.service(principal)
        run_ids = await service.enqueue(job_id, body.payloads, tenant_id=tenant)
        replay = await idempotency.remember(201, dump(RunIdsOut(run_ids=run_ids)))
    return JSONResponse(replay.body, status_code=replay.status)


@router.get(
    "/{job_id}/runs",
    response_model=Page[RunOut],
    responses=problems(404),
    summary="A job's runs, newest first",
)
async def job_runs(
    job_id: JobId,
    request: Request,
    principal: Reader,
    state: RunState | None = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    api = api_state(request)
    runs = await api.service(principal).runs(
        checked_job_id(job_id),
        tenant_id=principal.tenant_id,
        state=state,
        before_id=before_run(cursor),
        limit=limit + 1,
    )
    items, next_cursor = page(runs, limit, "run", "id")
    return {"items": [await run_body(api, r) for r in items], "next_cursor": next_cursor}
