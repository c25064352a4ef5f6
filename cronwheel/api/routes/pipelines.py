"""``/v1/pipelines``: create, list, read (the latest version or a given one), change
into a new version, delete pipeline definitions, and list a pipeline's versions
(decision 0025); start a pipeline run and list a pipeline's runs (the runs themselves
are under ``/v1/pipeline-runs``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.idempotency import Idempotency, IdempotencyKey
from cronwheel.api.inputs import PipelineIn
from cronwheel.api.openapi import problems
from cronwheel.api.routes import pipeline_runs
from cronwheel.api.routes.jobs import IfMatch, expected_version
from cronwheel.core.ids import checked_pipeline_id
from cronwheel.core.pipelines.definition import PipelineSpec
from cronwheel.core.pipelines.model import Pipeline
from cronwheel.web.auth import Reader, Writer
from cronwheel.web.pagination import (
    DEFAULT_LIMIT,
    Cursor,
    Limit,
    after_pipeline,
    before_version,
    encode,
)
from cronwheel.web.schemas import Page, PipelineOut, PipelineRunOut, PipelineVersionOut, dump
from cronwheel.web.state import api_state

router = APIRouter(prefix="/v1/pipelines", tags=["pipelines"], route_class=GuardedRoute)

PipelineId = Annotated[str, Path(max_length=64, description="A pipeline id (a UUID).")]
Version = Annotated[int, Query(ge=1, le=2**31 - 1, description="A version of the pipeline.")]


def body_of(pipeline: Pipeline) -> Any:
    return dump(PipelineOut.of(pipeline))


def pipeline_response(body: Any, status: int = 200) -> JSONResponse:
    """A pipeline answer, with the version it shows as the ETag (what PUT's If-Match
    names)."""
    headers = {"ETag": f'"{body["version"]}"'}
    if status == 201:
        headers["Location"] = f"/v1/pipelines/{body['id']}"
    return JSONResponse(body, status_code=status, headers=headers)


def _definition(spec: PipelineSpec) -> dict[str, Any]:
    return spec.model_dump(
        mode="json", by_alias=True, include={"tasks", "edges", "failure_policy", "notify"}
    )


@router.post(
    "",
    status_code=201,
    response_model=PipelineOut,
    responses=problems(409),
    summary="Create a pipeline",
)
async def create_pipeline(
    spec: PipelineIn, request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    """A new pipeline at version 1. Refused with a 422 naming the field: an edge to an
    unknown task (``edges.2.to``), a cycle (``edges``, its path in the detail), a task
    waiting for itself, an edge given twice, a fan-out without exactly one parent. A
    name a live pipeline of the tenant has: 409."""
    state = api_state(request)
    idempotency = await Idempotency.begin(request, state, principal.tenant_id, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        pipeline = await state.pipelines(principal).create(
            spec.name, _definition(spec), tenant_id=principal.tenant_id
        )
        replay = await idempotency.remember(201, body_of(pipeline))
    return pipeline_response(replay.body, replay.status)


@router.get("", response_model=Page[PipelineOut], responses=problems(), summary="List pipelines")
async def list_pipelines(
    request: Request,
    principal: Reader,
    name: Annotated[str | None, Query(max_length=200, description="Exactly this name.")] = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Live pipelines at their latest version, oldest first."""
    found = (
        await api_state(request)
        .pipelines(principal)
        .list_pipelines(
            tenant_id=principal.tenant_id, name=name, after=after_pipeline(cursor), limit=limit + 1
        )
    )
    items = found[:limit]
    next_cursor = encode("pipeline", items[-1].id) if len(found) > limit else None
    return {"items": [body_of(p) for p in items], "next_cursor": next_cursor}


@router.get(
    "/{pipeline_id}", response_model=PipelineOut, responses=problems(404), summary="Read a pipeline"
)
async def get_pipeline(
    pipeline_id: PipelineId, request: Request, principal: Reader, version: Version | None = None
) -> JSONResponse:
    """The latest version, or ``version``; a deleted pipeline too (``state: deleted``)."""
    pipeline = (
        await api_state(request)
        .pipelines(principal)
        .get(checked_pipeline_id(pipeline_id), version=version, tenant_id=principal.tenant_id)
    )
    return pipeline_response(body_of(pipeline))


@router.put(
    "/{pipeline_id}",
    response_model=PipelineOut,
    responses=problems(404, 409, 412, 428),
    summary="Change a pipeline's definition",
)
async def update_pipeline(
    pipeline_id: PipelineId,
    spec: PipelineSpec,
    request: Request,
    principal: Writer,
    if_match: IfMatch = None,
) -> JSONResponse:
    """The body is the whole new definition (``tasks``, ``edges``, ``failure_policy``;
    the name stays). ``If-Match`` names the version you changed (the ETag of your
    read): another version is a 412, none a 428. A new version is stored unless the
    content is the latest's (then the pipeline comes back as it is)."""
    expected = expected_version(if_match, what="pipeline")
    pipeline = (
        await api_state(request)
        .pipelines(principal)
        .update(
            checked_pipeline_id(pipeline_id),
            _definition(spec),
            expected_version=expected,
            tenant_id=principal.tenant_id,
        )
    )
    return pipeline_response(body_of(pipeline))


@router.delete(
    "/{pipeline_id}",
    response_model=PipelineOut,
    responses=problems(404),
    summary="Delete a pipeline",
)
async def delete_pipeline(
    pipeline_id: PipelineId, request: Request, principal: Writer
) -> JSONResponse:
    """Soft delete: the pipeline leaves the list and frees its name; its versions stay
    readable. Idempotent: deleting a deleted pipeline answers 200 with it unchanged."""
    pipeline = (
        await api_state(request)
        .pipelines(principal)
        .delete(checked_pipeline_id(pipeline_id), tenant_id=principal.tenant_id)
    )
    return pipeline_response(body_of(pipeline))


@router.get(
    "/{pipeline_id}/versions",
    response_model=Page[PipelineVersionOut],
    responses=problems(404),
    summary="A pipeline's versions, newest first",
)
async def pipeline_versions(
    pipeline_id: PipelineId,
    request: Request,
    principal: Reader,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    found = (
        await api_state(request)
        .pipelines(principal)
        .versions(
            checked_pipeline_id(pipeline_id),
            tenant_id=principal.tenant_id,
            before=before_version(cursor),
            limit=limit + 1,
        )
    )
    items = found[:limit]
    next_cursor = encode("pipeline-version", items[-1].version) if len(found) > limit else None
    return {"items": [dump(PipelineVersionOut.of(v)) for v in items], "next_cursor": next_cursor}


@router.post(
    "/{pipeline_id}/runs",
    status_code=201,
    response_model=PipelineRunOut,
    responses=problems(404, 409, 429),
    summary="Start a pipeline run",
)
async def start_pipeline_run(
    pipeline_id: PipelineId,
    request: Request,
    principal: Writer,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """A run of the pipeline's latest version: its root tasks' runs are created with it.
    With ``Idempotency-Key``, a repeated request answers the first one's run. It counts
    against the tenant's create rate as one creation per task (429 above it)."""
    state = api_state(request)
    idempotency = await Idempotency.begin(request, state, principal.tenant_id, idempotency_key)
    replay = await idempotency.replay()
    if replay is None:
        service = state.pipelines(principal)
        pipeline = await service.get(
            checked_pipeline_id(pipeline_id), tenant_id=principal.tenant_id
        )
        # A pipeline run creates a run per task (more with fan-outs): it counts against
        # the tenant's create rate as that many creations, before anything is written.
        await state.quotas.admit_runs(principal.tenant_id, len(pipeline.definition["tasks"]))
        run = await service.start(pipeline.id, tenant_id=principal.tenant_id)
        replay = await idempotency.remember(201, pipeline_runs.body_of(run))
    headers = {"Location": f"/v1/pipeline-runs/{replay.body['id']}"}
    return JSONResponse(replay.body, status_code=replay.status, headers=headers)


@router.get(
    "/{pipeline_id}/runs",
    response_model=Page[PipelineRunOut],
    responses=problems(404),
    summary="A pipeline's runs, newest first",
)
async def list_runs_of_pipeline(
    pipeline_id: PipelineId,
    request: Request,
    principal: Reader,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    service = api_state(request).pipelines(principal)
    await service.get(checked_pipeline_id(pipeline_id), tenant_id=principal.tenant_id)
    found = await service.list_runs(
        tenant_id=principal.tenant_id,
        pipeline_id=pipeline_id,
        before=after_pipeline(cursor),
        limit=limit + 1,
    )
    return pipeline_runs.page(found, limit)
