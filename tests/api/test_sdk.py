"""The Python SDK (cronwheel.AsyncClient) against the real API on each store; the sync
Client shares every call description, and is exercised against a real process in
tests/api/test_cli.py."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from cronwheel.actions import PermanentError, RunContext
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.sdk import AsyncClient, Client
from cronwheel.sdk.errors import (
    ConflictError,
    Forbidden,
    NotFoundError,
    StaleVersionError,
    Unauthorized,
    ValidationFailed,
)
from cronwheel.store.base import Store
from tests.api.helpers import ADMIN_TOKEN
from tests.engine.helpers import eventually, running

WEBHOOK = {"type": "webhook", "url": "https://example.com/hook"}
EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "Europe/Paris"}
# Leases long enough that a loaded machine never lets one lapse mid-task.
PIPELINE_WORKER = WorkerConfig(
    pools={"default": 4},
    lease_seconds=30.0,
    heartbeat_seconds=0.5,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
)


def sdk(app: FastAPI, token: str | None = ADMIN_TOKEN) -> AsyncClient:
    return AsyncClient("http://test", token, transport=httpx.ASGITransport(app=app))


async def test_the_lifecycle_of_a_job_through_the_sdk(app: FastAPI) -> None:
    async with sdk(app) as cw:
        job = await cw.create_job({"name": "report", "schedule": EVERY_MINUTE, "action": WEBHOOK})
        assert (job.state, job.version, job.schedule["timezone"]) == ("active", 1, "Europe/Paris")
        assert (await cw.get_job(job.id)).id == job.id
        page = await cw.list_jobs(limit=10)
        assert [j.name for j in page.items] == ["report"] and page.next_cursor is None
        changed = await cw.update_job(job.id, job.version, payload={"day": "monday"})
        assert (changed.version, changed.payload) == (2, {"day": "monday"})
        with pytest.raises(StaleVersionError):
            await cw.update_job(job.id, 1, payload={})
        paused = await cw.pause_job(job.id)
        assert paused.state == "paused"
        assert (await cw.resume_job(job.id)).state == "active"
        run = await cw.trigger_job(job.id)
        assert (run.state, run.job_id) == ("pending", job.id)
        assert [r.id for r in (await cw.job_runs(job.id)).items] == [run.id]
        detail = await cw.get_run(run.id)
        assert detail.attempts == []
        assert (await cw.cancel_run(run.id)).state == "cancelled"
        assert (await cw.cancel_job(job.id)).state == "cancelled"
        assert (await cw.dead_letter()).items == []
        assert await cw.replay_dead([run.id]) == []


async def test_errors_are_exceptions_carrying_the_problem(app: FastAPI) -> None:
    async with sdk(app) as cw:
        with pytest.raises(ValidationFailed) as invalid:
            await cw.create_job(
                {"name": "x", "schedule": {"kind": "cron", "cron": "61 * * * *"}, "action": WEBHOOK}
            )
        assert invalid.value.status == 422 and invalid.value.field == "schedule.cron"
        assert "61" in invalid.value.detail and invalid.value.problem["type"].endswith(
            "invalid-input"
        )
        await cw.create_job({"name": "dup", "schedule": EVERY_MINUTE, "action": WEBHOOK})
        with pytest.raises(ConflictError):
            await cw.create_job({"name": "dup", "schedule": EVERY_MINUTE, "action": WEBHOOK})
        with pytest.raises(NotFoundError):
            await cw.get_job("01a1ff91-f97e-7000-8a6d-746a4710197a")
    async with sdk(app, token="cw_nope_nope") as stranger:
        with pytest.raises(Unauthorized):
            await stranger.list_jobs()


async def test_tenants_and_keys_through_the_sdk(app: FastAPI) -> None:
    async with sdk(app) as admin:
        tenant = await admin.create_tenant("acme", "Acme Corp", max_jobs=5)
        assert (tenant.id, tenant.max_jobs) == ("acme", 5)
        assert "acme" in [t.id for t in await admin.list_tenants()]
        key = await admin.create_key("read", name="dashboards", tenant_id="acme")
        assert key.token and key.token.startswith("cw_")
    async with sdk(app, token=key.token) as reader:
        assert (await reader.list_jobs()).items == []
        with pytest.raises(Forbidden):
            await reader.create_job({"name": "nope", "schedule": EVERY_MINUTE, "action": WEBHOOK})
    async with sdk(app) as admin:
        await admin.revoke_key(key.id)
    async with sdk(app, token=key.token) as revoked:
        with pytest.raises(Unauthorized):
            await revoked.list_jobs()


async def test_idempotency_key_through_the_sdk(app: FastAPI) -> None:
    spec = {"name": "once", "schedule": {"kind": "immediate"}, "action": WEBHOOK}
    async with sdk(app) as cw:
        first = await cw.create_job(spec, idempotency_key="abc-123")
        again = await cw.create_job(spec, idempotency_key="abc-123")
        assert first.id == again.id
        with pytest.raises(ConflictError):
            await cw.create_job({**spec, "name": "other"}, idempotency_key="abc-123")


async def test_enqueue_through_the_sdk(app: FastAPI) -> None:
    manual = {"name": "queue", "schedule": {"kind": "manual"}, "action": WEBHOOK, "payload": 0}
    async with sdk(app) as cw:
        job = await cw.create_job(manual)
        run_ids = await cw.enqueue(job.id, [{"n": 1}, None])
        assert len(run_ids) == 2
        runs = {r.id: r.payload for r in (await cw.job_runs(job.id)).items}
        assert runs == {run_ids[0]: {"n": 1}, run_ids[1]: None}
        assert (await cw.get_run(run_ids[0])).payload == {"n": 1}
        first = await cw.enqueue(job.id, ("three",), idempotency_key="q-1")
        assert await cw.enqueue(job.id, ["three"], idempotency_key="q-1") == first
        assert len((await cw.job_runs(job.id)).items) == 3
        with pytest.raises(TypeError, match="one payload per run"):
            await cw.enqueue(job.id, {"n": 1})  # type: ignore[arg-type]
        cron = await cw.create_job({"name": "cron", "schedule": EVERY_MINUTE, "action": WEBHOOK})
        with pytest.raises(ConflictError) as refused:
            await cw.enqueue(cron.id, [1])
        assert refused.value.field == "schedule"
        with pytest.raises(ValidationFailed) as empty:
            await cw.enqueue(job.id, [])
        assert empty.value.field == "payloads"
        with pytest.raises(NotFoundError):
            await cw.enqueue("01a1ff91-f97e-7000-8a6d-746a4710197a", [1])


async def test_a_system_admin_client_acts_for_a_tenant(app: FastAPI) -> None:
    async with sdk(app) as admin:
        await admin.create_tenant("acme", "Acme")
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://test", ADMIN_TOKEN, transport=transport, tenant="acme") as cw:
        job = await cw.create_job({"name": "theirs", "schedule": EVERY_MINUTE, "action": WEBHOOK})
        assert job.tenant_id == "acme"
        assert [j.id for j in (await cw.list_jobs(name="theirs")).items] == [job.id]
        assert [j.id for j in (await cw.list_jobs(id_prefix=job.id[:-4])).items] == [job.id]
    async with sdk(app) as admin:
        assert (await admin.list_jobs(name="theirs")).items == []
        key = await admin.create_key("write", tenant_id="acme")
    assert key.token is not None
    async with AsyncClient("http://test", key.token, transport=transport, tenant="default") as cw:
        with pytest.raises(Forbidden, match="system admin"):
            await cw.list_jobs()


async def test_a_schedule_preview_through_the_sdk(app: FastAPI) -> None:
    async with sdk(app) as cw:
        preview = await cw.preview_schedule(EVERY_MINUTE, count=3)
        assert len(preview["fires"]) == 3 and preview["timezone"] == "Europe/Paris"
        assert preview["description"].startswith("Every minute, in Europe/Paris")
        with pytest.raises(ValidationFailed) as invalid:
            await cw.preview_schedule({"kind": "cron", "cron": "61 * * * *"})
        assert invalid.value.field == "schedule.cron"


async def test_list_jobs_in_an_order_and_its_cursor(app: FastAPI) -> None:
    async with sdk(app) as cw:
        for name in ("b", "c", "a"):
            await cw.create_job({"name": name, "schedule": EVERY_MINUTE, "action": WEBHOOK})
        first = await cw.list_jobs(order="-name", limit=2)
        assert [j.name for j in first.items] == ["c", "b"]
        rest = await cw.list_jobs(order="-name", cursor=first.next_cursor)
        assert [j.name for j in rest.items] == ["a"] and rest.next_cursor is None
        with pytest.raises(ValidationFailed) as err:
            await cw.list_jobs(order="name", cursor=first.next_cursor)
        assert err.value.field == "cursor"


async def test_pipelines_through_the_sdk(app: FastAPI) -> None:
    tasks = {"a": {"action": {"type": "handler", "name": "a"}}, "b": {"action": WEBHOOK}}
    first = {"tasks": tasks, "edges": [{"from": "a", "to": "b"}]}
    async with sdk(app) as cw:
        made = await cw.create_pipeline("etl", first, idempotency_key="p-1")
        assert (made.name, made.version, made.state) == ("etl", 1, "active")
        assert (await cw.create_pipeline("etl", first, idempotency_key="p-1")).id == made.id
        with pytest.raises(ConflictError):
            await cw.create_pipeline("etl", first)
        with pytest.raises(ValidationFailed) as invalid:
            await cw.create_pipeline("bad", {"tasks": tasks, "edges": [{"from": "a", "to": "c"}]})
        assert invalid.value.field == "edges.0.to"
        changed = await cw.update_pipeline(
            made.id, 1, made.definition | {"failure_policy": "continue"}
        )
        assert (changed.version, changed.failure_policy) == (2, "continue")
        with pytest.raises(StaleVersionError):
            await cw.update_pipeline(made.id, 1, first)
        assert (await cw.get_pipeline(made.id, version=1)).failure_policy == "stop"
        assert (await cw.get_pipeline(made.id)).version == 2
        assert [p.id for p in (await cw.list_pipelines(name="etl")).items] == [made.id]
        assert [v.version for v in (await cw.pipeline_versions(made.id)).items] == [2, 1]
        assert (await cw.delete_pipeline(made.id)).state == "deleted"
        assert (await cw.list_pipelines()).items == []
        with pytest.raises(NotFoundError):
            await cw.get_pipeline(made.id, version=3)


async def test_pipeline_runs_through_the_sdk(app: FastAPI, store: Store) -> None:
    """Start (once per Idempotency-Key), list (by pipeline, by state, a page at a time),
    read with every task row, retry a dead task, cancel; a worker moves the runs on."""
    worker = Worker(store, PIPELINE_WORKER)
    broken = threading.Event()
    broken.set()

    @worker.handler("a")
    def a(ctx: RunContext) -> int:
        return 1

    @worker.handler("c")
    def c(ctx: RunContext) -> None:
        assert ctx.inputs == {"b": None}

    @worker.handler("b")
    def b(ctx: RunContext) -> None:
        if broken.is_set():
            raise PermanentError("not yet")

    chain = {
        "tasks": {t: {"action": {"type": "handler", "name": t}} for t in ("a", "b", "c")},
        "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}],
    }
    async with sdk(app) as cw:
        made = await cw.create_pipeline("sdk-chain", chain)
        first = await cw.start_pipeline(made.id, idempotency_key="go-1")
        assert (first.state, first.version, first.pipeline_id) == ("running", 1, made.id)
        [root] = first.tasks
        assert (root.task, root.state, root.run_state) == ("a", "started", "pending")
        assert (await cw.start_pipeline(made.id, idempotency_key="go-1")).id == first.id
        assert (await cw.get_run(root.run_id or 0)).job_id == first.job_id

        async def ended() -> Any:
            found = await cw.get_pipeline_run(first.id)
            return found if found.state != "running" else None

        async with running(worker):
            failed = await eventually(ended)
            assert failed.state == "failed"
            rows = {t.task: (t.state, t.reason) for t in failed.tasks}
            assert rows == {
                "a": ("succeeded", None),
                "b": ("dead", None),
                "c": ("skipped", "upstream_failed"),
            }
            with pytest.raises(ConflictError) as not_dead:
                await cw.retry_pipeline_task(first.id, "a")
            assert not_dead.value.field == "task"
            broken.clear()
            again = await cw.retry_pipeline_task(first.id, "b")
            assert again.state == "running" and "c" not in {t.task for t in again.tasks}
            done = await eventually(ended)
        assert done.state == "succeeded"
        assert {t.task: t.state for t in done.tasks} == dict.fromkeys("abc", "succeeded")

        second = await cw.start_pipeline(made.id)
        cancelled = await cw.cancel_pipeline_run(second.id)
        assert (cancelled.state, cancelled.cancel_requested) == ("cancelled", True)
        assert (await cw.cancel_pipeline_run(second.id)).state == "cancelled"
        other = await cw.create_pipeline("sdk-other", chain)
        third = await cw.start_pipeline(other.id)

        everything = await cw.list_pipeline_runs()
        assert [r.id for r in everything.items] == [third.id, second.id, first.id]
        assert all(r.tasks == [] for r in everything.items)
        mine = await cw.list_pipeline_runs(made.id, limit=1)
        assert [r.id for r in mine.items] == [second.id] and mine.next_cursor
        rest = await cw.list_pipeline_runs(made.id, cursor=mine.next_cursor)
        assert [r.id for r in rest.items] == [first.id] and rest.next_cursor is None
        assert [r.id for r in (await cw.list_pipeline_runs(state="cancelled")).items] == [second.id]
        with pytest.raises(ValidationFailed) as bad_state:
            await cw.list_pipeline_runs(state="nope")
        assert bad_state.value.field == "state"
        with pytest.raises(NotFoundError):
            await cw.get_pipeline_run("01a1ff91-f97e-7000-8a6d-746a4710197a")
        with pytest.raises(NotFoundError):
            await cw.retry_pipeline_task(first.id, "no-such-task")
        await cw.delete_pipeline(other.id)
        with pytest.raises(ConflictError):
            await cw.start_pipeline(other.id)


def test_the_sync_client_speaks_to_pipeline_runs_as_the_async_one() -> None:
    """Every pipeline-run call of the sync client sends what the async one sends."""
    seen: list[tuple[str, str, str | None]] = []
    run = {
        "id": "01a1ff91-f97e-7000-8a6d-746a4710197a",
        "tenant_id": "default",
        "pipeline_id": "p",
        "version": 1,
        "job_id": "p",
        "state": "running",
        "actor": "t",
        "created_at": "2026-11-24T00:00:00+00:00",
        "tasks": [{"task": "x y", "instance": 0, "state": "dead", "run_id": 7}],
    }

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, str(request.url), request.headers.get("Idempotency-Key")))
        body = {"items": [run], "next_cursor": None} if request.method == "GET" else run
        if request.url.path.endswith(run["id"]):
            body = run
        return httpx.Response(200, json=body)

    with Client("http://test", "t", transport=httpx.MockTransport(answer)) as cw:
        started = cw.start_pipeline("p", idempotency_key="k")
        assert started.tasks[0].run_id == 7 and started.tasks[0].run_state is None
        cw.list_pipeline_runs("p", state="failed", limit=5)
        cw.list_pipeline_runs()
        cw.get_pipeline_run(run["id"])
        cw.cancel_pipeline_run(run["id"])
        cw.retry_pipeline_task(run["id"], "x y")
    base = "http://test/v1/pipeline-runs"
    assert seen == [
        ("POST", "http://test/v1/pipelines/p/runs", "k"),
        ("GET", f"{base}?pipeline_id=p&state=failed&limit=5", None),
        ("GET", base, None),
        ("GET", f"{base}/{run['id']}", None),
        ("POST", f"{base}/{run['id']}/cancel", None),
        ("POST", f"{base}/{run['id']}/tasks/x%20y/retry", None),
    ]
