"""A real worker on each store: progress and checkpoints reach the store while the run
executes, the next attempt resumes from the last checkpoint, and a cancel reaches a
handler that awaits it."""

from __future__ import annotations

import asyncio
import threading

from cronwheel.actions import RunContext
from cronwheel.core.model import MAX_CHECKPOINT_BYTES, AttemptOutcome, RetryPolicy, Run, RunState
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store.base import Store
from tests.engine.helpers import eventually, job_with_run, one_run, running

FAST = WorkerConfig(
    pools={"default": 4},
    lease_seconds=2.0,
    heartbeat_seconds=0.2,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
)


async def test_progress_and_checkpoints_are_stored_while_the_run_executes(store: Store) -> None:
    worker = Worker(store, FAST)
    release = threading.Event()

    @worker.handler("noop")
    def half_way(ctx: RunContext) -> None:
        ctx.progress(0.5, "500 of 1000 rows")
        ctx.checkpoint({"row": 500})
        release.wait(30)

    job, _ = await job_with_run(store)
    async with running(worker):
        # A heartbeat stores them while the handler still runs.
        run = await eventually(lambda: _with_checkpoint(store, job.id))
        assert run.state is RunState.RUNNING
        assert (run.progress, run.progress_message) == (0.5, "500 of 1000 rows")
        assert run.checkpoint == {"row": 500} and run.checkpoint_at is not None
        release.set()
        await eventually(lambda: _finished(store, job.id))
    run = await one_run(store, job.id)
    assert (run.state, run.checkpoint, run.progress) == (RunState.SUCCEEDED, {"row": 500}, 0.5)


async def test_a_retry_resumes_from_the_checkpoint_its_failed_attempt_left(store: Store) -> None:
    """The handler checkpoints and fails before any heartbeat: the completion carries
    the checkpoint, and the retry gets it as ``ctx.checkpoint_state``."""
    worker = Worker(store, FAST)
    seen: list[object] = []

    @worker.handler("noop")
    async def resumable(ctx: RunContext) -> None:
        seen.append(ctx.checkpoint_state)
        if ctx.checkpoint_state is None:
            ctx.progress(0.5)
            ctx.checkpoint({"resume_at": 50})
            raise RuntimeError("crashed half way")
        ctx.progress(1.0, "done")

    job, _ = await job_with_run(store)
    async with running(worker):
        await eventually(lambda: _finished(store, job.id))
    assert seen == [None, {"resume_at": 50}]
    run = await one_run(store, job.id)
    assert (run.state, run.progress, run.progress_message) == (RunState.SUCCEEDED, 1.0, "done")
    assert run.checkpoint == {"resume_at": 50}


async def test_a_checkpoint_over_the_limit_fails_the_attempt_saying_why(store: Store) -> None:
    worker = Worker(store, FAST)

    @worker.handler("noop")
    def too_big(ctx: RunContext) -> None:
        ctx.checkpoint("x" * MAX_CHECKPOINT_BYTES)

    job, _ = await job_with_run(store, retry=RetryPolicy(max_attempts=1))
    await worker.run_once()
    run = await one_run(store, job.id)
    assert run.state is RunState.DEAD and run.checkpoint_at is None
    assert f"over the limit of {MAX_CHECKPOINT_BYTES}" in (run.last_error or "")


async def test_a_cancel_reaches_an_async_handler_awaiting_it(store: Store) -> None:
    worker = Worker(store, FAST)
    started = asyncio.Event()

    @worker.handler("noop")
    async def wait_for_cancel(ctx: RunContext) -> None:
        started.set()
        await ctx.cancelled  # returns once the worker hears of the cancel: the run is cancelled

    job, _ = await job_with_run(store)
    async with running(worker):
        await asyncio.wait_for(started.wait(), 30)
        run = await one_run(store, job.id)
        await store.cancel_run("default", run.id, now=await store.now(), actor="ops")
        await eventually(lambda: _finished(store, job.id))
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert (run.state, attempt.outcome) == (RunState.CANCELLED, AttemptOutcome.CANCELLED)


async def test_a_sync_handler_that_returns_on_a_cancel_records_cancelled(store: Store) -> None:
    worker = Worker(store, FAST)
    started = threading.Event()

    @worker.handler("noop")
    def stop_when_told(ctx: RunContext) -> None:
        started.set()
        ctx.cancelled.wait(30)  # then returns normally: still a cancelled run, not a success

    job, _ = await job_with_run(store)
    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        run = await one_run(store, job.id)
        await store.cancel_run("default", run.id, now=await store.now(), actor="ops")
        await eventually(lambda: _finished(store, job.id))
    run = await one_run(store, job.id)
    assert run.state is RunState.CANCELLED


async def _with_checkpoint(store: Store, job_id: str) -> Run | None:
    run = await one_run(store, job_id)
    return run if run.checkpoint_at is not None else None


async def _finished(store: Store, job_id: str) -> bool:
    return (await one_run(store, job_id)).state.finished


async def _true(value: bool) -> bool:
    return value
