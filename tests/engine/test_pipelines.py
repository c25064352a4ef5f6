"""Pipeline runs on each store with a real worker (decision 0025): tasks start when
their prerequisites end, once each, with their parents' results as inputs; failures skip
what depended on them; fan-out and fan-in; cancel, retry and versions."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from cronwheel.actions import PermanentError, RunContext
from cronwheel.control.pipelines import PipelineService
from cronwheel.core.model import DEFAULT_TENANT, RunState
from cronwheel.core.pipelines.model import PipelineRun
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store.base import Store
from tests.engine.helpers import eventually, running

# Leases long enough that a loaded machine never lets one lapse mid-task.
CONFIG = WorkerConfig(
    pools={"default": 8},
    lease_seconds=30.0,
    heartbeat_seconds=0.5,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
)


def handler(name: str, **extra: Any) -> dict[str, Any]:
    return {"action": {"type": "handler", "name": name}, **extra}


DIAMOND = {
    "tasks": {t: handler(t) for t in ("a", "b", "c", "d")},
    "edges": [
        {"from": "a", "to": "b"},
        {"from": "a", "to": "c"},
        {"from": "b", "to": "d"},
        {"from": "c", "to": "d"},
    ],
}


async def finished(service: PipelineService, pipeline_run_id: str) -> PipelineRun | None:
    found = await service.get_run(pipeline_run_id)
    return found if found.state != "running" else None


def states(run: PipelineRun) -> dict[str, tuple[str, str | None]]:
    return {f"{t.task}.{t.instance}": (t.state, t.reason) for t in run.tasks}


async def test_a_diamond_runs_in_order_and_its_join_once_with_both_inputs(store: Store) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    order: list[str] = []
    seen: dict[str, Any] = {}

    @worker.handler("a")
    def a(ctx: RunContext) -> int:
        order.append("a")
        return 1

    @worker.handler("b")
    async def b(ctx: RunContext) -> int:
        order.append("b")
        assert ctx.inputs is not None
        return int(ctx.inputs["a"]) + 1

    @worker.handler("c")
    async def c(ctx: RunContext) -> dict[str, int]:
        order.append("c")
        return {"c": 3}

    @worker.handler("d")
    async def d(ctx: RunContext) -> str:
        order.append("d")
        seen.update(inputs=ctx.inputs, task=ctx.task, run=ctx.pipeline_run_id)
        return "done"

    pipeline = await service.create("diamond", DIAMOND)
    started = await service.start(pipeline.id)
    assert [(t.task, t.state) for t in started.tasks] == [("a", "started")]
    async with running(worker):
        done = await eventually(lambda: finished(service, started.id))
    assert done.state == "succeeded" and done.version == 1
    assert order[0] == "a" and order[-1] == "d" and sorted(order) == ["a", "b", "c", "d"]
    assert seen == {"inputs": {"b": 2, "c": {"c": 3}}, "task": "d", "run": started.id}
    assert states(done) == {k: ("succeeded", None) for k in ("a.0", "b.0", "c.0", "d.0")}
    d_run = await store.get_run(DEFAULT_TENANT, done.tasks[-1].run_id or 0)
    assert d_run is not None and d_run.result == "done" and d_run.state is RunState.SUCCEEDED
    # Every task's run is an ordinary run of the pipeline's own job: one run per task.
    runs = await store.list_runs(DEFAULT_TENANT, job_id=done.job_id)
    assert sorted(r.task or "" for r in runs) == ["a", "b", "c", "d"]


async def test_a_dead_task_skips_what_needed_it_runs_its_cleanup_and_fails(store: Store) -> None:
    service = PipelineService(store)
    ran: list[str] = []

    def new_worker() -> Worker:
        worker = Worker(store, CONFIG)
        for name in ("a", "c", "d", "cleanup"):
            worker.handler(name)(lambda ctx, name=name: ran.append(name))

        @worker.handler("b")
        def b(ctx: RunContext) -> None:
            raise PermanentError("the input file is corrupt")

        return worker

    definition = {
        "tasks": {**DIAMOND["tasks"], "cleanup": handler("cleanup")},  # type: ignore[dict-item]
        "edges": [*DIAMOND["edges"], {"from": "b", "to": "cleanup", "on": "on_failure"}],
        "failure_policy": "continue",
    }
    pipeline = await service.create("cleans-up", definition)
    started = await service.start(pipeline.id)
    async with running(new_worker()):
        done = await eventually(lambda: finished(service, started.id))
    assert sorted(ran) == ["a", "c", "cleanup"]
    assert states(done)["b.0"] == ("dead", None)  # why: on its run
    assert states(done)["d.0"] == ("skipped", "upstream_failed")
    assert states(done)["cleanup.0"] == ("succeeded", None)
    # b's failure was handled by its cleanup edge: the documented rule says succeeded.
    assert done.state == "succeeded"

    # Without the cleanup edge the same failure fails the pipeline run.
    plain = await service.create("fails", DIAMOND)
    started = await service.start(plain.id)
    async with running(new_worker()):
        done = await eventually(lambda: finished(service, started.id))
    assert done.state == "failed"
    assert states(done)["d.0"] == ("skipped", "upstream_failed")


async def test_a_fan_out_of_100_then_a_fan_in_that_runs_once_with_100_inputs(
    store: Store,
) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    totals: list[Any] = []

    @worker.handler("list")
    def make_list(ctx: RunContext) -> list[int]:
        return list(range(100))

    @worker.handler("square")
    async def square(ctx: RunContext) -> int:
        return int(ctx.payload) ** 2  # type: ignore[arg-type]

    @worker.handler("sum")
    async def total(ctx: RunContext) -> int:
        assert ctx.inputs is not None
        totals.append(ctx.inputs["square"])
        return sum(ctx.inputs["square"])

    definition = {
        "tasks": {
            "list": handler("list"),
            "square": handler("square", fan_out={"max": 100}),
            "sum": handler("sum"),
        },
        "edges": [{"from": "list", "to": "square"}, {"from": "square", "to": "sum"}],
    }
    pipeline = await service.create("fan", definition)
    started = await service.start(pipeline.id)
    async with running(worker):
        done = await eventually(lambda: finished(service, started.id), timeout=60)
    assert done.state == "succeeded"
    assert totals == [[i * i for i in range(100)]]  # once, in instance order
    squares = [t for t in done.tasks if t.task == "square"]
    assert [t.instance for t in squares] == list(range(100))
    assert len({t.run_id for t in squares}) == 100


async def test_a_retried_task_resumes_the_tasks_that_waited_for_it(store: Store) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    broken = threading.Event()
    broken.set()
    ran: list[str] = []
    for name in ("a", "c", "d"):
        worker.handler(name)(lambda ctx, name=name: ran.append(name))

    @worker.handler("b")
    def b(ctx: RunContext) -> None:
        if broken.is_set():
            raise PermanentError("not yet")
        ran.append("b")

    pipeline = await service.create("retried", {**DIAMOND, "failure_policy": "continue"})
    started = await service.start(pipeline.id)
    async with running(worker):
        failed = await eventually(lambda: finished(service, started.id))
        assert failed.state == "failed"
        assert states(failed)["d.0"] == ("skipped", "upstream_failed")
        broken.clear()
        again = await service.retry_task(started.id, "b")
        assert again.state == "running" and states(again)["b.0"] == ("started", None)
        assert "d.0" not in states(again)
        done = await eventually(lambda: finished(service, started.id))
    assert done.state == "succeeded"
    assert sorted(ran) == ["a", "b", "c", "d"]
    # b's run was replayed: still one run per task.
    b_runs = [t for t in done.tasks if t.task == "b"]
    assert len(b_runs) == 1 and b_runs[0].run_id == states_run(failed, "b")


def states_run(run: PipelineRun, task: str) -> int | None:
    return next(t.run_id for t in run.tasks if t.task == task)


async def test_cancel_stops_the_running_task_and_starts_nothing_more(store: Store) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    started_b = asyncio.Event()
    ran: list[str] = []
    for name in ("a", "c", "d"):
        worker.handler(name)(lambda ctx, name=name: ran.append(name))

    @worker.handler("b")
    async def b(ctx: RunContext) -> None:
        started_b.set()
        await ctx.cancelled

    chain = {
        "tasks": {t: handler(t) for t in ("a", "b", "d")},
        "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "d"}],
    }
    pipeline = await service.create("cancelled", chain)
    started = await service.start(pipeline.id)
    async with running(worker):
        await asyncio.wait_for(started_b.wait(), 30)
        await service.cancel_run(started.id)
        done = await eventually(lambda: finished(service, started.id))
    assert done.state == "cancelled"
    assert states(done)["b.0"] == ("cancelled", None)
    assert states(done)["d.0"] == ("skipped", "upstream_failed")
    assert ran == ["a"]


async def test_a_new_version_does_not_change_a_pipeline_run_in_flight(store: Store) -> None:
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    gate = threading.Event()
    ran: list[str] = []

    @worker.handler("a")
    def a(ctx: RunContext) -> None:
        gate.wait(30)
        ran.append("a")

    worker.handler("b")(lambda ctx: ran.append("b"))
    worker.handler("z")(lambda ctx: ran.append("z"))
    chain = {"tasks": {"a": handler("a"), "b": handler("b")}, "edges": [{"from": "a", "to": "b"}]}
    pipeline = await service.create("versioned", chain)
    started = await service.start(pipeline.id)
    v2 = await service.update(
        pipeline.id,
        {"tasks": {"a": handler("a"), "z": handler("z")}, "edges": [{"from": "a", "to": "z"}]},
    )
    assert v2.version == 2
    async with running(worker):
        gate.set()
        done = await eventually(lambda: finished(service, started.id))
    assert (done.state, done.version, ran) == ("succeeded", 1, ["a", "b"])


async def test_a_stale_or_repeated_completion_starts_no_child_twice(store: Store) -> None:
    """Two completions of the same attempt (a retried write, a racing duplicate) reach
    the store at once: one is accepted, and the child task starts once."""
    from datetime import UTC, datetime, timedelta

    from cronwheel.core.lifecycle import Outcome, OutcomeKind, completion_for

    service = PipelineService(store)
    chain = {"tasks": {"a": handler("a"), "b": handler("b")}, "edges": [{"from": "a", "to": "b"}]}
    pipeline = await service.create("once", chain)
    started = await service.start(pipeline.id)
    now = datetime.now(UTC)
    [claimed] = await store.claim_runs(
        "w1", ["default"], limit=10, now=now, prefetch_until=now, lease_seconds=30
    )
    assert claimed.run.task == "a" and claimed.action == {"type": "handler", "name": "a"}
    done = completion_for(
        claimed,
        Outcome(OutcomeKind.SUCCEEDED, result="[1]"),
        worker_id="w1",
        started_at=now,
        finished_at=now + timedelta(milliseconds=5),
        rng=__import__("random").Random(1),
    )
    assert done.pipeline_run_id == started.id
    results = await asyncio.gather(
        store.complete_runs([done]), store.complete_runs([done]), return_exceptions=True
    )
    assert sorted(len(r) for r in results if isinstance(r, list)) == [0, 1]
    again = await store.complete_runs([done])
    assert again == []
    got = await service.get_run(started.id)
    assert [(t.task, t.instance) for t in got.tasks] == [("a", 0), ("b", 0)]
    b_runs = [r for r in await store.list_runs(DEFAULT_TENANT, job_id=got.job_id) if r.task == "b"]
    assert len(b_runs) == 1 and b_runs[0].inputs == {"a": [1]}


async def test_maintenance_moves_on_a_pipeline_whose_task_was_cancelled_directly(
    store: Store,
) -> None:
    """A task's run that ends by another path than a worker's completion (here a cancel
    of the run itself) is picked up by the reconciler."""
    from datetime import UTC, datetime

    service = PipelineService(store)
    chain = {"tasks": {"a": handler("a"), "b": handler("b")}, "edges": [{"from": "a", "to": "b"}]}
    pipeline = await service.create("reconciled", chain)
    started = await service.start(pipeline.id)
    a_run = started.tasks[0].run_id
    assert a_run is not None
    await store.cancel_run(DEFAULT_TENANT, a_run, now=datetime.now(UTC), actor="alice")
    assert (await service.get_run(started.id)).state == "running"
    assert await store.advance_pipelines(now=datetime.now(UTC)) == 1
    done = await service.get_run(started.id)
    assert done.state == "failed"
    assert states(done) == {"a.0": ("cancelled", None), "b.0": ("skipped", "upstream_failed")}
    assert await store.advance_pipelines(now=datetime.now(UTC)) == 0


async def test_a_job_whose_action_is_a_pipeline_starts_one_pipeline_run_per_run(
    store: Store,
) -> None:
    """Triggers are jobs: the job's run starts a pipeline run, keyed by that run, so a
    retried trigger finds the pipeline run it started instead of starting another."""
    from cronwheel.control.service import JobService
    from cronwheel.core.model import new_id
    from cronwheel.core.pipelines.model import PipelineRunStart
    from cronwheel.errors import InvalidInput

    service, jobs = PipelineService(store), JobService(store)
    worker = Worker(store, CONFIG)
    ran: list[str] = []
    worker.handler("a")(lambda ctx: ran.append("a"))
    pipeline = await service.create("triggered", {"tasks": {"a": handler("a")}, "edges": []})
    try:
        await jobs.create(
            name="bad-trigger",
            schedule={"kind": "immediate"},
            action={"type": "pipeline", "pipeline_id": new_id()},
        )
    except InvalidInput as exc:
        assert exc.field == "action.pipeline_id"
    else:
        raise AssertionError("a trigger of an unknown pipeline was accepted")
    job = await jobs.create(
        name="nightly-etl",
        schedule={"kind": "immediate"},
        action={"type": "pipeline", "pipeline_id": pipeline.id},
    )
    async with running(worker):
        [trigger] = await eventually(lambda: _finished_runs(store, job.id))
        [started] = await eventually(lambda: service.list_runs(pipeline_id=pipeline.id))
        done = await eventually(lambda: finished(service, started.id))
    assert (done.state, done.trigger_run_id, done.job_id, ran) == (
        "succeeded",
        trigger.id,
        job.id,
        ["a"],
    )
    assert trigger.result == {"pipeline_run_id": started.id}
    # The same trigger run again (its worker died before completing it): the same one.
    again = await store.start_pipeline_run(
        PipelineRunStart(
            id=new_id(),
            tenant_id=DEFAULT_TENANT,
            pipeline_id=pipeline.id,
            version=1,
            definition=pipeline.definition,
            job_id=job.id,
            job_version=job.version,
            actor="test",
            now=done.created_at,
            trigger_run_id=trigger.id,
        )
    )
    assert again.id == started.id
    assert len(await service.list_runs(pipeline_id=pipeline.id)) == 1


async def _finished_runs(store: Store, job_id: str) -> list[Any]:
    runs = await store.list_runs(DEFAULT_TENANT, job_id=job_id)
    trigger = [r for r in runs if r.task is None]
    return trigger if trigger and all(r.state.finished for r in trigger) else []


async def test_a_pipelines_targets_hear_how_its_runs_end_and_its_hooks_too(
    store: Store,
) -> None:
    """A pipeline's own notify targets get ``pipeline_succeeded`` / ``pipeline_failed``
    (naming the tasks that failed), written with the ending, signed, once per event id;
    in-process hooks see the same envelopes."""
    import json

    from cronwheel.actions import verify
    from cronwheel.engine.notifier import Notifier, NotifierConfig
    from cronwheel.security.egress import LOOPBACK, EgressPolicy
    from cronwheel.security.signing import tenant_key
    from tests.engine.test_notifications import notifying
    from tests.engine.webhook_target import webhook_target

    secret = b"pipes"
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    worker.handler("a")(lambda ctx: None)

    @worker.handler("b")
    def b(ctx: RunContext) -> None:
        raise PermanentError("no")

    with webhook_target() as target:
        target.answers["/done"] = [(200, {})]
        notify = [{"on": ["succeeded", "failed"], "url": f"{target.url}/done"}]
        ok = await service.create(
            "tells-ok", {"tasks": {"a": handler("a")}, "edges": [], "notify": notify}
        )
        bad = await service.create(
            "tells-bad",
            {
                "tasks": {"a": handler("a"), "b": handler("b")},
                "edges": [{"from": "a", "to": "b"}],
                "notify": notify,
            },
        )
        assert ok.definition["notify"] == [{"on": ["succeeded", "failed"], "url": notify[0]["url"]}]
        notifier = Notifier(
            store,
            config=NotifierConfig(interval_seconds=0.05),
            secret=secret,
            egress=EgressPolicy.parse(LOOPBACK),
        )
        hooked: list[str] = []

        @notifier.on("pipeline_succeeded", "pipeline_failed")
        def hook(envelope: dict[str, Any]) -> None:
            hooked.append(envelope["type"])

        first, second = await service.start(ok.id), await service.start(bad.id)
        async with running(worker), notifying(notifier):
            await eventually(lambda: finished(service, first.id))
            await eventually(lambda: finished(service, second.id))
            await eventually(lambda: _delivered(target, 2))
    bodies = {}
    for request in target.received:
        assert verify(tenant_key(secret, DEFAULT_TENANT), request.headers, request.body)
        body = json.loads(request.body)
        bodies[body["pipeline_run"]["id"]] = body
    assert bodies[first.id]["type"] == "pipeline_succeeded"
    assert bodies[first.id]["pipeline_run"]["state"] == "succeeded"
    assert bodies[first.id]["error"] is None
    assert bodies[second.id]["type"] == "pipeline_failed"
    assert bodies[second.id]["error"] == "tasks.b failed"
    assert bodies[second.id]["job"]["name"] == "pipeline:tells-bad"
    assert sorted(hooked) == ["pipeline_failed", "pipeline_succeeded"]


async def _delivered(target: Any, n: int) -> bool:
    return len({r.body for r in target.received}) >= n


async def test_a_job_cannot_ask_for_pipeline_events_and_targets_are_checked(
    store: Store,
) -> None:
    from cronwheel.control.service import JobService
    from cronwheel.errors import InvalidInput

    try:
        await JobService(store).create(
            name="confused",
            schedule={"kind": "manual"},
            action={"type": "handler", "name": "a"},
            notify=[{"on": ["pipeline_failed"], "url": "https://example.com/x"}],
        )
    except InvalidInput as exc:
        assert exc.field == "notify.0.on" and "pipeline's event" in exc.reason
    else:
        raise AssertionError("a job's target asked for a pipeline event")
    try:
        await PipelineService(store).create(
            "bad-target",
            {"tasks": {"a": handler("a")}, "notify": [{"on": ["dead"], "url": "https://x.y"}]},
        )
    except InvalidInput as exc:
        assert exc.field.startswith("notify.0.on")
    else:
        raise AssertionError("a pipeline target asked for a run event")


async def test_a_pipeline_run_that_cannot_be_planned_never_refuses_the_completion(
    store: Store,
) -> None:
    """A defect that makes planning fail (here: a stored definition broken behind the
    store's back) must not make the store refuse the worker's completion, which would be
    sent again forever: the completion is written, the pipeline run waits, and
    maintenance moves it on once planning works again."""
    import random
    from datetime import UTC, datetime, timedelta

    from cronwheel.core.lifecycle import Outcome, OutcomeKind, completion_for
    from tests.store.test_migrations import _ddl

    service = PipelineService(store)
    chain = {"tasks": {"a": handler("a"), "b": handler("b")}, "edges": [{"from": "a", "to": "b"}]}
    pipeline = await service.create("breaks", chain)
    started = await service.start(pipeline.id)
    stored = pipeline.definition
    await _ddl(
        store,
        "UPDATE pipeline_versions SET definition = '{\"tasks\": {}}'"
        f" WHERE pipeline_id = '{pipeline.id}'",
    )
    now = datetime.now(UTC)
    [claimed] = await store.claim_runs(
        "w1", ["default"], limit=10, now=now, prefetch_until=now, lease_seconds=30
    )
    done = completion_for(
        claimed,
        Outcome(OutcomeKind.SUCCEEDED),
        worker_id="w1",
        started_at=now,
        finished_at=now + timedelta(milliseconds=5),
        rng=random.Random(1),
    )
    assert await store.complete_runs([done]) == [claimed.run.id]
    a_run = await store.get_run(DEFAULT_TENANT, claimed.run.id)
    assert a_run is not None and a_run.state is RunState.SUCCEEDED
    assert await store.advance_pipelines(now=now) == 1  # tried, logged, still stuck
    import json

    text = json.dumps(stored).replace("'", "''")
    await _ddl(
        store,
        f"UPDATE pipeline_versions SET definition = '{text}' WHERE pipeline_id = '{pipeline.id}'",
    )
    assert await store.advance_pipelines(now=now) == 1
    moved = await service.get_run(started.id)
    assert [(t.task, t.state) for t in moved.tasks] == [("a", "succeeded"), ("b", "started")]


async def test_a_trigger_jobs_overlap_policy_applies_to_its_pipeline_runs(store: Store) -> None:
    """overlap: skip on the trigger job: while a pipeline run's task is running, the
    next trigger is skipped (reason overlap) instead of starting a second pipeline run."""
    from cronwheel.control.service import JobService

    service, jobs = PipelineService(store), JobService(store)
    worker = Worker(store, CONFIG)
    release = threading.Event()
    worker.handler("slow")(lambda ctx: release.wait(30))
    pipeline = await service.create("one-at-a-time", {"tasks": {"slow": handler("slow")}})
    job = await jobs.create(
        name="one-at-a-time-trigger",
        schedule={"kind": "manual"},
        action={"type": "pipeline", "pipeline_id": pipeline.id},
        overlap="skip",
    )
    async with running(worker):
        await jobs.trigger(job.id)
        [first] = await eventually(lambda: service.list_runs(pipeline_id=pipeline.id))

        async def slow_running() -> bool:
            got = await service.get_run(first.id)
            return bool(got.tasks) and got.tasks[0].run_state == "running"

        await eventually(slow_running)
        second = await jobs.trigger(job.id)

        async def skipped() -> Any:
            run = await store.get_run(DEFAULT_TENANT, second.id)
            return run if run is not None and run.state.finished else None

        run = await eventually(skipped)
        assert run.state is RunState.SKIPPED and run.reason.startswith("overlap")
        release.set()
        await eventually(lambda: finished(service, first.id))
    assert len(await service.list_runs(pipeline_id=pipeline.id)) == 1


@pytest.mark.both_stores  # each store decides it in its own claim
async def test_a_queue_job_runs_its_pipeline_runs_one_after_another(store: Store) -> None:
    """Issue 29 item 4: with a real scheduler and worker, a job every second under
    ``overlap: queue`` whose pipeline run takes longer (its task b works 1.5 s) starts
    each pipeline run once the one before has ended, none skipped. Before decision 0044
    the next trigger started beside task b: nothing of the job was ``running`` between
    the trigger's success and a task's claim."""
    from cronwheel.control.service import JobService
    from cronwheel.engine.scheduler import Scheduler, SchedulerConfig

    service, jobs = PipelineService(store), JobService(store)
    worker = Worker(store, CONFIG)
    worker.handler("a")(lambda ctx: None)
    worker.handler("b")(lambda ctx: time.sleep(1.5))  # work: longer than the interval
    two_steps = {
        "tasks": {"a": handler("a"), "b": handler("b")},
        "edges": [{"from": "a", "to": "b"}],
    }
    pipeline = await service.create("slower-than-its-schedule", two_steps)
    job = await jobs.create(
        name="every-second-etl",
        schedule={"kind": "interval", "every_seconds": 1},
        action={"type": "pipeline", "pipeline_id": pipeline.id},
        overlap="queue",
    )

    async def four_ended() -> list[PipelineRun]:
        found = await service.list_runs(pipeline_id=pipeline.id)
        ended = [r for r in found if r.state != "running"]
        return ended if len(ended) >= 4 else []

    stop = asyncio.Event()
    scheduler = Scheduler(store, config=SchedulerConfig(interval_seconds=0.1))
    async with running(worker):
        ticking = asyncio.create_task(scheduler.run(stop))
        try:
            await eventually(four_ended, timeout=60)
            await jobs.pause(job.id)
        finally:
            stop.set()
            await asyncio.wait_for(ticking, timeout=60)
    started = sorted(await service.list_runs(pipeline_id=pipeline.id), key=lambda r: r.created_at)
    ended = [r for r in started if r.finished_at is not None]
    assert len(ended) >= 4 and {r.state for r in ended} == {"succeeded"}
    for before, after in itertools.pairwise(started):
        assert before.finished_at is not None and before.finished_at <= after.created_at, (
            f"pipeline run {after.id} started at {after.created_at} while {before.id} ran"
            f" until {before.finished_at}"
        )
    triggers = [r for r in await store.list_runs(DEFAULT_TENANT, job_id=job.id) if r.task is None]
    assert RunState.SKIPPED not in {r.state for r in triggers}  # queued, never skipped


async def test_a_webhook_task_gets_its_inputs_in_the_request_envelope(store: Store) -> None:
    import json

    from tests.engine.webhook_target import webhook_target

    service = PipelineService(store)
    worker = Worker(store, replace_allow(CONFIG))
    worker.handler("a")(lambda ctx: {"rows": 42})
    with webhook_target() as target:
        target.answers["/b"] = [(200, {})]
        definition = {
            "tasks": {
                "a": handler("a"),
                "b": {"action": {"type": "webhook", "url": f"{target.url}/b"}},
            },
            "edges": [{"from": "a", "to": "b"}],
        }
        pipeline = await service.create("hooked", definition)
        started = await service.start(pipeline.id)
        async with running(worker):
            done = await eventually(lambda: finished(service, started.id))
    assert done.state == "succeeded"
    [request] = target.received
    body = json.loads(request.body)
    assert body["inputs"] == {"a": {"rows": 42}}
    assert (body["pipeline_run_id"], body["task"]) == (started.id, "b")


def replace_allow(config: WorkerConfig) -> WorkerConfig:
    """The webhook targets of these tests listen on loopback."""
    import dataclasses

    from cronwheel.security.egress import LOOPBACK

    return dataclasses.replace(config, webhook_allow=LOOPBACK)


async def test_a_tasks_concurrency_key_holds_for_its_fanned_out_instances(
    store: Store,
) -> None:
    """A task may name a concurrency key (decision 0031), rendered from each instance's
    item: instances of one group never run two at once, two groups do."""
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    now: dict[int, int] = {0: 0, 1: 0}
    peak: dict[int, int] = {0: 0, 1: 0}
    both = [0]

    @worker.handler("list")
    def make_list(ctx: RunContext) -> list[dict[str, int]]:
        return [{"group": i % 2} for i in range(12)]

    @worker.handler("piece")
    async def piece(ctx: RunContext) -> None:
        group = ctx.payload["group"]  # type: ignore[index]
        now[group] += 1
        peak[group] = max(peak[group], now[group])
        both[0] = max(both[0], now[0] + now[1])
        await asyncio.sleep(0.02)  # long enough for instances to overlap, if allowed
        now[group] -= 1

    definition = {
        "tasks": {
            "list": handler("list"),
            "piece": handler(
                "piece",
                fan_out={"max": 100},
                concurrency={"key": "g:{payload.group}", "limit": 1},
            ),
        },
        "edges": [{"from": "list", "to": "piece"}],
    }
    pipeline = await service.create("keyed", definition)
    started = await service.start(pipeline.id)
    async with running(worker):
        done = await eventually(lambda: finished(service, started.id), timeout=60)
    assert done.state == "succeeded"
    assert peak == {0: 1, 1: 1}
    pieces = [t for t in done.tasks if t.task == "piece"]
    keys = [(await store.get_run(DEFAULT_TENANT, t.run_id)).concurrency_key for t in pieces]  # type: ignore[union-attr,arg-type]
    assert keys == [f"g:{i % 2}" for i in range(12)]


@pytest.mark.both_stores  # the stores differ here
async def test_a_task_retried_after_its_pipeline_run_was_archived(store: Store) -> None:
    """Once a pipeline run has finished, maintenance may archive its task runs (decision
    0032); a retry brings them back, and the task that waited gets its parents' results."""
    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    broken = threading.Event()
    broken.set()
    seen: dict[str, Any] = {}
    worker.handler("a")(lambda ctx: 1)
    worker.handler("c")(lambda ctx: {"c": 3})

    @worker.handler("b")
    def b(ctx: RunContext) -> int:
        if broken.is_set():
            raise PermanentError("not yet")
        assert ctx.inputs is not None
        return int(ctx.inputs["a"]) + 1

    @worker.handler("d")
    def d(ctx: RunContext) -> str:
        seen.update(inputs=ctx.inputs)
        return "done"

    pipeline = await service.create("archived", {**DIAMOND, "failure_policy": "continue"})
    started = await service.start(pipeline.id)
    async with running(worker):
        failed = await eventually(lambda: finished(service, started.id))
        # Every task run finished more than the settle time before this instant.
        later = await store.now() + timedelta(minutes=1)
        moved = await store.archive_runs(now=later, partition_seconds=60)
        assert moved == (3 if store.__class__.__name__ == "PostgresStore" else 0)
        assert await service.get_run(started.id) == failed  # the same tasks and run states
        broken.clear()
        again = await service.retry_task(started.id, "b")
        assert again.state == "running" and states(again)["b.0"] == ("started", None)
        done = await eventually(lambda: finished(service, started.id))
    assert done.state == "succeeded"
    assert seen == {"inputs": {"b": 2, "c": {"c": 3}}}
