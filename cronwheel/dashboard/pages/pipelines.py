"""The pipelines pages: the tenant's pipelines with their latest runs, one pipeline's runs,
the recent pipeline runs of every pipeline, and one pipeline run as a graph of its tasks
(live while it runs), each task linked to its run's page.

Reads go through :class:`~cronwheel.control.pipelines.PipelineService`, as
``/v1/pipelines`` and ``/v1/pipeline-runs`` do, for the viewer's tenant; starting, cancelling
and retrying are buttons that call those endpoints (``static/ui.js``). The graph is laid
out on the server, a column per dependency depth (:mod:`cronwheel.core.pipelines.progress`),
in HTML and CSS: no script draws it, and a screen reader reads it as lists.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.core.ids import checked_pipeline_id, checked_pipeline_run_id
from cronwheel.core.pipelines.model import Pipeline, PipelineRun
from cronwheel.core.pipelines.progress import layers, progress
from cronwheel.dashboard.live import shared_reads
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer
from cronwheel.errors import NotFound
from cronwheel.web.pagination import after_pipeline, encode
from cronwheel.web.state import api_state

router = APIRouter(route_class=PageRoute, include_in_schema=False)

RUNS_PAGE = 50
"""Pipeline runs per page of a list."""
PIPELINES_PAGE = 100
RECENT = 10
"""The latest runs the pipelines page shows under its list."""
STATES = ("running", "succeeded", "failed", "cancelled")
EDGE_WORDS = {"on_failure": "if it failed", "on_finished": "however it ended"}
"""How a task's card says an edge's condition (``on_success``, the default, says nothing)."""


def _state_filter(state: str) -> str:
    """A state filter from a URL: one of the pipeline run states, else none."""
    return state if state in STATES else ""


async def _names(request: Request, viewer: Viewer, runs: list[PipelineRun]) -> dict[str, str]:
    """The name of each pipeline of ``runs`` (a deleted one's too)."""
    store = api_state(request).store
    names: dict[str, str] = {}
    for run in runs:
        if run.pipeline_id not in names:
            found = await store.get_pipeline(viewer.tenant_id, run.pipeline_id)
            names[run.pipeline_id] = found.name if found else run.pipeline_id
    return names


async def _runs(
    request: Request, viewer: Viewer, *, pipeline_id: str | None, state: str, cursor: str | None
) -> tuple[list[PipelineRun], str | None]:
    """A page of pipeline runs, newest first, and the cursor of the next page."""
    found = (
        await api_state(request)
        .pipelines(viewer.principal)
        .list_runs(
            tenant_id=viewer.tenant_id,
            pipeline_id=pipeline_id,
            state=state or None,
            before=after_pipeline(cursor),
            limit=RUNS_PAGE + 1,
        )
    )
    rows = found[:RUNS_PAGE]
    return rows, encode("pipeline", rows[-1].id) if len(found) > RUNS_PAGE else None


def _query(state: str, cursor: str | None = None) -> str:
    pairs = [("state", state)] if state else []
    if cursor:
        pairs.append(("cursor", cursor))
    return urlencode(pairs)


@router.get("/ui/pipelines")
async def pipelines_page(
    request: Request, viewer: CurrentViewer, cursor: str | None = None
) -> HTMLResponse:
    service = api_state(request).pipelines(viewer.principal)
    found = await service.list_pipelines(
        tenant_id=viewer.tenant_id, after=after_pipeline(cursor), limit=PIPELINES_PAGE + 1
    )
    pipelines = found[:PIPELINES_PAGE]
    next_cursor = encode("pipeline", pipelines[-1].id) if len(found) > PIPELINES_PAGE else None
    recent = await service.list_runs(tenant_id=viewer.tenant_id, limit=RECENT)
    return page(
        request,
        viewer,
        "pipelines.html",
        title="Pipelines",
        pipelines=pipelines,
        next_cursor=next_cursor,
        first_page=cursor is None,
        recent=recent,
        names=await _names(request, viewer, recent),
        can_write=viewer.can("write"),
    )


@router.get("/ui/pipeline-runs")
async def pipeline_runs_page(
    request: Request, viewer: CurrentViewer, state: str = "", cursor: str | None = None
) -> HTMLResponse:
    state = _state_filter(state)
    runs, next_cursor = await _runs(request, viewer, pipeline_id=None, state=state, cursor=cursor)
    return page(
        request,
        viewer,
        "pipeline_runs.html",
        title="Pipeline runs",
        pipeline=None,
        runs=runs,
        names=await _names(request, viewer, runs),
        states=STATES,
        state=state,
        base="/ui/pipeline-runs",
        first_page=cursor is None,
        first_query=_query(state),
        next_query=None if next_cursor is None else _query(state, next_cursor),
        can_write=viewer.can("write"),
    )


@router.get("/ui/pipelines/{pipeline_id}")
async def pipeline_page(
    pipeline_id: str,
    request: Request,
    viewer: CurrentViewer,
    state: str = "",
    cursor: str | None = None,
) -> HTMLResponse:
    service = api_state(request).pipelines(viewer.principal)
    pipeline = await service.get(checked_pipeline_id(pipeline_id), tenant_id=viewer.tenant_id)
    state = _state_filter(state)
    runs, next_cursor = await _runs(
        request, viewer, pipeline_id=pipeline.id, state=state, cursor=cursor
    )
    return page(
        request,
        viewer,
        "pipeline_runs.html",
        title=f"Pipeline {pipeline.name}",
        pipeline=pipeline,
        runs=runs,
        names={pipeline.id: pipeline.name},
        states=STATES,
        state=state,
        base=f"/ui/pipelines/{pipeline.id}",
        first_page=cursor is None,
        first_query=_query(state),
        next_query=None if next_cursor is None else _query(state, next_cursor),
        can_write=viewer.can("write"),
    )


async def _run_facts(
    request: Request, viewer: Viewer, pipeline_run_id: str, *, shared: bool
) -> dict[str, Any]:
    """The pipeline run, its pipeline at the run's version, and where each task stands:
    as of this second for a live refresh (``shared``: one read for every tab), fresh for
    a page load, which follows a person's click (a retry's reload must not show the run
    as it was before the retry, and a finished page does not refresh)."""
    service = api_state(request).pipelines(viewer.principal)

    async def read() -> dict[str, Any]:
        run = await service.get_run(pipeline_run_id, tenant_id=viewer.tenant_id)
        pipeline = await service.get(
            run.pipeline_id, version=run.version, tenant_id=viewer.tenant_id
        )
        return {"run": run, "pipeline": pipeline}

    key = f"pipeline-run:{viewer.tenant_id}:{pipeline_run_id}"
    facts: dict[str, Any] = await (shared_reads(request).get(key, read) if shared else read())
    run: PipelineRun = facts["run"]
    pipeline: Pipeline = facts["pipeline"]
    tasks = progress(pipeline.definition, [asdict(t) for t in run.tasks])
    return {
        **facts,
        "layers": layers(tasks),
        "tasks": tasks,
        "edge_words": EDGE_WORDS,
        "live": run.state == "running",
        "can_write": viewer.can("write"),
    }


def _pipeline_run_id(text: str) -> str:
    """A pipeline run id from a URL; anything else names no pipeline run (the 404 page)."""
    if len(text) > 64:
        raise NotFound("pipeline_run", text[:64])
    return checked_pipeline_run_id(text)


@router.get("/ui/pipeline-runs/{pipeline_run_id}")
async def pipeline_run_page(
    pipeline_run_id: str, request: Request, viewer: CurrentViewer
) -> HTMLResponse:
    facts = await _run_facts(request, viewer, _pipeline_run_id(pipeline_run_id), shared=False)
    name = facts["pipeline"].name
    return page(request, viewer, "pipeline_run.html", title=f"Pipeline run of {name}", **facts)


@router.get("/ui/live/pipeline-runs/{pipeline_run_id}")
async def pipeline_run_live(
    pipeline_run_id: str, request: Request, viewer: CurrentViewer
) -> HTMLResponse:
    facts = await _run_facts(request, viewer, _pipeline_run_id(pipeline_run_id), shared=True)
    return fragment("pipeline_run_live.html", **facts)
