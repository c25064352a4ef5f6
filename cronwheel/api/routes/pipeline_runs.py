"""``/v1/pipeline-runs``: read, list, cancel pipeline runs and retry a dead task
(decision 0025). A pipeline run is started at ``POST /v1/pipelines/{id}/runs``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.openapi import problems
from cronwheel.core.ids import checked_pipeline_run_id
from cronwheel.core.pipelines.model import PipelineRun
from cronwheel.web.auth import Reader, Writer
from cronwheel.web.pagination import DEFAULT_LIMIT, Cursor, Limit, after_pipeline, encode
from cronwheel.web.schemas import Page, PipelineRunOut, dump
from cronwheel.web.state import api_state

router = APIRouter(prefix="/v1/pipeline-runs", tags=["pipelines"], route_class=GuardedRoute)

PipelineRunId = Annotated[str, Path(max_length=64, description="A pipeline run id (a UUID).")]
TaskName = Annotated[str, Path(max_length=64, description="A task of the pipeline.")]
State = Annotated[
    str | None,
    Query(
        pattern="^(running|succeeded|failed|cancelled)$",
        description="Only pipeline runs in this state.",
    ),
]


def body_of(run: PipelineRun) -> Any:
    return dump(PipelineRunOut.of(run))


def page(found: list[PipelineRun], limit: int) -> dict[str, Any]:
    """A page of pipeline runs, newest first; the cursor points below the last."""
    items = found[:limit]
    cursor = encode("pipeline", items[-1].id) if len(found) > limit else None
    return {"items": [body_of(r) for r in items], "next_cursor": cursor}


@router.get(
    "", response_model=Page[PipelineRunOut], responses=problems(), summary="List pipeline runs"
)
async def list_pipeline_runs(
    request: Request,
    principal: Reader,
    pipeline_id: Annotated[
        str | None, Query(max_length=64, description="Of this pipeline.")
    ] = None,
    state: State = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """The tenant's pipeline runs, newest first, without their tasks."""
    found = (
        await api_state(request)
        .pipelines(principal)
        .list_runs(
            tenant_id=principal.tenant_id,
            pipeline_id=pipeline_id,
            state=state,
            before=after_pipeline(cursor),
            limit=limit + 1,
        )
    )
    return page(found, limit)


@router.get(
    "/{pipeline_run_id}",
    response_model=PipelineRunOut,
    responses=problems(404),
    summary="Read a pipeline run with every task's state",
)
async def get_pipeline_run(
    pipeline_run_id: PipelineRunId, request: Request, principal: Reader
) -> Any:
    run = (
        await api_state(request)
        .pipelines(principal)
        .get_run(checked_pipeline_run_id(pipeline_run_id), tenant_id=principal.tenant_id)
    )
    return body_of(run)


@router.post(
    "/{pipeline_run_id}/cancel",
    response_model=PipelineRunOut,
    responses=problems(404),
    summary="Cancel a pipeline run",
)
async def cancel_pipeline_run(
    pipeline_run_id: PipelineRunId, request: Request, principal: Writer
) -> Any:
    """Pending tasks are cancelled, running ones asked to stop (they see ``ctx.cancelled``
    at their next heartbeat), nothing new starts; the run ends ``cancelled`` once its
    running tasks have ended. Idempotent."""
    run = (
        await api_state(request)
        .pipelines(principal)
        .cancel_run(checked_pipeline_run_id(pipeline_run_id), tenant_id=principal.tenant_id)
    )
    return body_of(run)


@router.post(
    "/{pipeline_run_id}/tasks/{task}/retry",
    response_model=PipelineRunOut,
    responses=problems(404, 409, 429),
    summary="Retry a dead task",
)
async def retry_pipeline_task(
    pipeline_run_id: PipelineRunId, task: TaskName, request: Request, principal: Writer
) -> Any:
    """The task's dead runs are replayed; the tasks skipped because it failed wait for it
    again, and the pipeline run is running again. A task that is not dead: 409."""
    state = api_state(request)
    await state.quotas.admit_runs(principal.tenant_id, 1)  # a replay counts as a creation
    run = await state.pipelines(principal).retry_task(
        checked_pipeline_run_id(pipeline_run_id), task, tenant_id=principal.tenant_id
    )
    return body_of(run)
