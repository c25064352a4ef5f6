"""The pipelines pages in-process, on both stores: a pipeline run's graph, a column per
step, each task with its state, why it was skipped and a link to its run (a fan-out's
instances counted and listed), live while it runs; the lists of pipelines and of
pipeline runs; buttons only for a key that may use them. tests/browser/test_pipelines.py
looks at them in a browser."""

from __future__ import annotations

import html
import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.actions import PermanentError, RunContext
from cronwheel.api import AuthConfig, create_app
from cronwheel.control.pipelines import PipelineService
from cronwheel.core.pipelines.model import PipelineRun
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store.base import Store
from cronwheel.web.auth import SESSION_COOKIE
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, new_key, new_tenant
from tests.engine.helpers import eventually, running

# Leases long enough that a loaded machine never lets one lapse mid-task.
CONFIG = WorkerConfig(
    pools={"default": 4},
    lease_seconds=30.0,
    heartbeat_seconds=0.5,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
)


def handler(name: str, **extra: Any) -> dict[str, Any]:
    return {"action": {"type": "handler", "name": name}, **extra}


# split fans out into three squares, summed; audit fails for good, so report is skipped.
GRAPH = {
    "tasks": {
        "split": handler("split"),
        "square": handler("square", fan_out={"max": 10}),
        "sum": handler("sum"),
        "audit": handler("audit"),
        "report": handler("report"),
    },
    "edges": [
        {"from": "split", "to": "square"},
        {"from": "square", "to": "sum"},
        {"from": "split", "to": "audit"},
        {"from": "audit", "to": "report"},
        {"from": "sum", "to": "report", "on": "on_finished"},
    ],
    "failure_policy": "continue",
}


@pytest.fixture
def app(store: Store) -> FastAPI:
    return create_app(store, auth=AuthConfig(admin_token=ADMIN_TOKEN))


async def _get(app: FastAPI, path: str, token: str = ADMIN_TOKEN) -> httpx.Response:
    async with connect(app, cookies={SESSION_COOKIE: token}) as tab:
        response: httpx.Response = await tab.get(path)
    return response


async def _page(app: FastAPI, path: str, token: str = ADMIN_TOKEN) -> str:
    response = await _get(app, path, token)
    assert response.status_code == 200, response.text
    return response.text


def _card(page: str, task: str) -> str:
    """The HTML of one task's card."""
    found = re.search(
        rf'<li class="task [^"]*" id="task-{re.escape(task)}">(.*?)\n      </li>', page, re.S
    )
    assert found, f"no card for {task}"
    return found.group(1)


def _steps(page: str) -> list[list[str]]:
    """The task names of each step (column) of the graph, in order."""
    columns = page.split('<li class="layer">')[1:]
    return [re.findall(r'id="task-([^"]+)"', column) for column in columns]


async def _finished(service: PipelineService, run_id: str) -> PipelineRun | None:
    found = await service.get_run(run_id)
    return found if found.state != "running" else None


async def test_a_finished_pipeline_run_shows_its_graph_by_step(app: FastAPI, store: Store) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    worker.handler("split")(lambda ctx: [1, 2, 3])
    worker.handler("square")(lambda ctx: ctx.payload * ctx.payload)
    worker.handler("sum")(lambda ctx: sum(ctx.inputs["square"]))  # type: ignore[index]
    worker.handler("report")(lambda ctx: None)

    @worker.handler("audit")
    def audit(ctx: RunContext) -> None:
        raise PermanentError("the books do not balance")

    pipeline = await service.create("ledger", GRAPH)
    started = await service.start(pipeline.id)
    async with running(worker):
        done = await eventually(lambda: _finished(service, started.id))
    assert done.state == "failed"
    runs = {(t.task, t.instance): t.run_id for t in done.tasks}

    page = await _page(app, f"/ui/pipeline-runs/{done.id}")
    assert "<title>Pipeline run of ledger · cronwheel</title>" in page
    assert "data-live" not in page  # finished: nothing to refresh
    assert _steps(page) == [["split"], ["square", "audit"], ["sum"], ["report"]]
    split = _card(page, "split")
    assert f'<a href="/ui/runs/{runs[("split", 0)]}">split</a>' in split
    assert 'badge s-succeeded">succeeded<' in split
    square = _card(page, "square")
    assert '<span class="task-count">\u00d73</span>' in square
    assert "<summary>3 succeeded</summary>" in square
    for i in range(3):
        assert f'<a href="/ui/runs/{runs[("square", i)]}">#{i}</a>' in square
    audit_card = _card(page, "audit")
    assert 'badge s-dead">dead<' in audit_card
    assert f"POST /v1/pipeline-runs/{done.id}/tasks/audit/retry" in audit_card
    report = _card(page, "report")
    assert 'badge s-skipped">skipped<' in report and "upstream_failed" in report
    assert "/ui/runs/" not in report  # never ran
    after = html.unescape(re.sub(r"<[^>]+>", "", report))
    assert "after audit, sum (however it ended)" in " ".join(after.split())
    assert "Cancel pipeline run" not in page  # finished
    assert 'badge s-failed">failed<' in page

    # A task's run page links back to its pipeline run.
    task_page = await _page(app, f"/ui/runs/{runs[('audit', 0)]}")
    assert f'href="/ui/pipeline-runs/{done.id}#task-audit"' in task_page


async def test_a_running_pipeline_run_is_live_and_its_buttons_follow_the_key(
    app: FastAPI, store: Store
) -> None:
    service = PipelineService(store)
    pipeline = await service.create("waits", GRAPH)
    started = await service.start(pipeline.id)  # no worker: split stays pending
    page = await _page(app, f"/ui/pipeline-runs/{started.id}")
    assert f'data-live="/ui/live/pipeline-runs/{started.id}"' in page
    live = await _page(app, f"/ui/live/pipeline-runs/{started.id}")
    assert "<html" not in live
    for shown in (page, live):
        assert 'badge s-pending">pending<' in _card(shown, "split")
        for task in ("square", "sum", "audit", "report"):
            assert 'badge s-waiting">waiting<' in _card(shown, task)
        assert f'data-action="POST /v1/pipeline-runs/{started.id}/cancel"' in shown
    async with connect(app, ADMIN_TOKEN) as api:
        reader = (await new_key(api, "read"))["token"]
    read_page = await _page(app, f"/ui/pipeline-runs/{started.id}", reader)
    assert "data-action" not in read_page and 'badge s-pending">pending<' in read_page
    # A live refresh shares its read with every tab for a second; a page load (after a
    # click: cancel, retry) reads afresh, or it could show the run as it was before.
    await _page(app, f"/ui/live/pipeline-runs/{started.id}")
    await service.cancel_run(started.id)
    cancelled = await _page(app, f"/ui/pipeline-runs/{started.id}")
    assert 'badge s-cancelled">cancelled<' in cancelled
    assert "data-live" not in cancelled and "Cancel pipeline run" not in cancelled


async def test_the_lists_of_pipelines_and_of_pipeline_runs(app: FastAPI, store: Store) -> None:
    service = PipelineService(store)
    first = await service.create("nightly", GRAPH)
    other = await service.create("hourly", GRAPH)
    old = await service.start(first.id)
    await service.cancel_run(old.id)
    new = await service.start(first.id)
    elsewhere = await service.start(other.id)

    listed = await _page(app, "/ui/pipelines")
    assert re.search(r'<a href="/ui/pipelines" aria-current="page">Pipelines</a>', listed)
    assert f'<a href="/ui/pipelines/{first.id}">nightly</a>' in listed
    assert f'<a href="/ui/pipelines/{other.id}">hourly</a>' in listed
    assert listed.index(elsewhere.id) < listed.index(new.id) < listed.index(old.id)
    assert '<a href="/ui/pipeline-runs">All pipeline runs</a>' in listed

    every = await _page(app, "/ui/pipeline-runs")
    assert [elsewhere.id, new.id, old.id] == re.findall(
        r'<a class="mono" href="/ui/pipeline-runs/([^"]+)">', every
    )
    cancelled = await _page(app, "/ui/pipeline-runs?state=cancelled")
    assert re.findall(r'href="/ui/pipeline-runs/([^"]+)">', cancelled) == [old.id]
    ignored = await _page(app, "/ui/pipeline-runs?state=nonsense")  # an unknown filter: none
    assert old.id in ignored and new.id in ignored

    mine = await _page(app, f"/ui/pipelines/{first.id}")
    assert re.findall(r'<a class="mono" href="/ui/pipeline-runs/([^"]+)">', mine) == [
        new.id,
        old.id,
    ]
    assert f'data-action="POST /v1/pipelines/{first.id}/runs"' in mine
    assert 'data-then="/ui/pipeline-runs/{id}"' in mine
    await service.delete(other.id)
    deleted = await _page(app, f"/ui/pipelines/{other.id}")
    assert "deleted" in deleted and "Start a run" not in deleted
    assert elsewhere.id in deleted


async def test_another_tenants_pipeline_run_is_not_found(app: FastAPI, store: Store) -> None:
    service = PipelineService(store)
    pipeline = await service.create("private", GRAPH)
    run = await service.start(pipeline.id)
    async with connect(app, ADMIN_TOKEN) as api:
        await new_tenant(api, "acme")
        token = (await new_key(api, "admin", "acme"))["token"]
    for path in (
        f"/ui/pipeline-runs/{run.id}",
        f"/ui/pipelines/{pipeline.id}",
        "/ui/pipeline-runs/not-a-run",
        "/ui/pipelines/not-a-pipeline",
        f"/ui/live/pipeline-runs/{run.id}",
    ):
        response = await _get(app, path, token)
        assert response.status_code == 404, path
        assert "Not found" in response.text
    assert run.id not in await _page(app, "/ui/pipeline-runs", token)
    assert "No pipeline yet." in await _page(app, "/ui/pipelines", token)


async def test_a_pipelines_job_links_to_its_pipeline(app: FastAPI, store: Store) -> None:
    service = PipelineService(store)
    pipeline = await service.create("linked", GRAPH)
    run = await service.start(pipeline.id)  # makes the pipeline's own job
    page = await _page(app, f"/ui/jobs/{run.job_id}")
    assert f'<a href="/ui/pipelines/{pipeline.id}">its pipeline</a>' in page
