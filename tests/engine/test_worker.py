"""The worker on each store, real time: execution, retries, dead letters, timeouts,
cancellation, fences, firing on time and graceful shutdown."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwheel.actions import PermanentError, RunContext
from cronwheel.core.model import (
    REASON_AT_MOST_ONCE_STOPPED,
    SHARED_WORKERS,
    AttemptOutcome,
    Backoff,
    Delivery,
    RetryPolicy,
    RunState,
)
from cronwheel.engine import eventloop
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.security.egress import LOOPBACK
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import make_job, make_run
from tests.engine.helpers import eventually, job_with_run, one_run, run_states, running

FAST = WorkerConfig(
    pools={"default": 4},
    lease_seconds=2.0,
    heartbeat_seconds=0.2,
    prefetch_seconds=0.5,
    poll_seconds=0.05,
    grace_seconds=0.5,
    webhook_allow=LOOPBACK,  # the webhook targets of these tests listen on 127.0.0.1
)


async def test_sync_and_async_handlers_run_and_record_their_attempt(store: Store) -> None:
    worker = Worker(store, FAST)
    seen: list[tuple[str, object]] = []

    @worker.handler("noop")
    def sync_handler(ctx: RunContext) -> None:
        seen.append(("sync", ctx.payload))

    @worker.handler("async")
    async def async_handler(ctx: RunContext) -> None:
        seen.append(("async", ctx.idempotency_key))

    sync_job, _ = await job_with_run(store)
    async_job, async_run = await job_with_run(store, action={"type": "handler", "name": "async"})
    assert await worker.run_once() == 2
    expected_key = f"{async_job.id}:{async_run.scheduled_for.isoformat()}"
    assert sorted(seen, key=str) == sorted(
        [("sync", sync_job.payload), ("async", expected_key)], key=str
    )
    run = await one_run(store, sync_job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert (run.state, attempt.outcome, attempt.worker_id) == (
        RunState.SUCCEEDED,
        AttemptOutcome.SUCCEEDED,
        worker.id,
    )
    assert attempt.lag_seconds is not None and attempt.lag_seconds >= 0


async def test_enqueued_runs_execute_with_their_own_payloads(store: Store) -> None:
    worker = Worker(store, FAST)
    seen: list[tuple[object, str]] = []

    @worker.handler("noop")
    def handler(ctx: RunContext) -> None:
        seen.append((ctx.payload, ctx.idempotency_key))

    job = replace(make_job(schedule={"kind": "manual"}, payload="the job's"), next_fire_at=None)
    await store.create_jobs([job])
    now = datetime.now(UTC)
    template = make_run(job, now, reason="enqueued by tester")
    ids = await store.enqueue_runs(template, ['{"n": 1}', None, '{"n": 2}'])
    async with running(worker):
        await eventually(lambda: _all_succeeded(store, job.id, 3))
    assert sorted(seen, key=str) == sorted(
        [
            ({"n": 1}, f"{job.id}:{now.isoformat()}"),
            ("the job's", f"{job.id}:{(now + timedelta(microseconds=1)).isoformat()}"),
            ({"n": 2}, f"{job.id}:{(now + timedelta(microseconds=2)).isoformat()}"),
        ],
        key=str,
    )
    assert sorted(r.id for r in await store.list_runs("default", job_id=job.id)) == ids


async def test_a_stop_right_after_the_runs_finished_writes_each_result_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # Stopped while a batch of completions is being written, a worker used to take those
    # runs for unfinished ones and release them too: every release was refused (the run
    # had succeeded) and logged as "fenced out", and a release that won the race would
    # have made a finished run pending again.
    worker = Worker(store, replace(FAST, pools={"default": 500}))
    stop = asyncio.Event()
    n = 300
    seen: list[int] = []

    @worker.handler("noop")
    async def handler(ctx: RunContext) -> None:
        seen.append(ctx.run_id)
        if len(seen) == n:
            stop.set()

    job = replace(make_job(schedule={"kind": "manual"}), next_fire_at=None)
    await store.create_jobs([job])
    await store.enqueue_runs(make_run(job, datetime.now(UTC)), [None] * n)
    with caplog.at_level(logging.WARNING, logger="cronwheel"):
        await asyncio.wait_for(worker.run(stop), 60)
    assert [r for r in caplog.records if "fenced out" in r.getMessage()] == []
    runs = await store.list_runs("default", job_id=job.id, limit=n)
    assert Counter(r.state for r in runs) == {RunState.SUCCEEDED: n}
    attempts = [await store.list_attempts("default", r.id) for r in runs]
    assert sorted(len(a) for a in attempts) == [1] * n


async def _all_succeeded(store: Store, job_id: str, n: int) -> bool:
    states = await run_states(store, job_id)
    return states == [RunState.SUCCEEDED.value] * n


async def test_a_failing_handler_is_retried_then_dead_lettered(store: Store) -> None:
    worker = Worker(store, FAST)
    calls: list[int] = []

    @worker.handler("noop")
    def boom(ctx: RunContext) -> None:
        calls.append(ctx.attempt)
        raise RuntimeError(f"failure number {ctx.attempt}")

    job, _ = await job_with_run(store)
    async with running(worker):
        await eventually(lambda: _state_is(store, job.id, "dead"))
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert calls == [1, 2, 3]
    assert [(a.attempt, a.outcome, a.error_class) for a in attempts] == [
        (n, AttemptOutcome.FAILED, "RuntimeError") for n in (1, 2, 3)
    ]
    assert run.last_error == "failure number 3"


async def test_a_permanent_error_skips_the_retries(store: Store) -> None:
    worker = Worker(store, FAST)

    @worker.handler("noop")
    def refuse(ctx: RunContext) -> None:
        raise PermanentError("the customer was deleted")

    job, _ = await job_with_run(store)
    assert await worker.run_once() == 1
    run = await one_run(store, job.id)
    assert (run.state, run.attempt) == (RunState.DEAD, 1)


async def test_a_run_that_outlives_its_timeout_is_timed_out(store: Store) -> None:
    worker = Worker(store, FAST)

    @worker.handler("noop")
    async def slow(ctx: RunContext) -> None:
        await asyncio.sleep(30)

    job, _ = await job_with_run(store, timeout_seconds=0.2, retry=RetryPolicy(max_attempts=1))
    assert await worker.run_once() == 1
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert (run.state, attempt.outcome) == (RunState.DEAD, AttemptOutcome.TIMED_OUT)


async def test_a_sync_handler_past_its_timeout_is_told_to_stop(store: Store) -> None:
    worker = Worker(store, FAST)
    told = threading.Event()

    @worker.handler("noop")
    def slow(ctx: RunContext) -> None:
        if ctx.cancelled.wait(10):
            told.set()

    job, _ = await job_with_run(store, timeout_seconds=0.2, retry=RetryPolicy(max_attempts=1))
    assert await worker.run_once() == 1
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert (run.state, attempt.outcome) == (RunState.DEAD, AttemptOutcome.TIMED_OUT)
    await eventually(lambda: _true(told.is_set()))


async def test_a_handler_that_swallows_its_timeout_is_still_timed_out(store: Store) -> None:
    worker = Worker(store, FAST)

    @worker.handler("noop")
    async def stubborn(ctx: RunContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            return  # pretends it finished

    job, _ = await job_with_run(store, timeout_seconds=0.2, retry=RetryPolicy(max_attempts=1))
    assert await worker.run_once() == 1
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT


async def test_a_handlers_own_timeout_error_is_a_failure_not_a_timeout(store: Store) -> None:
    worker = Worker(store, FAST)

    @worker.handler("noop")
    async def gives_up(ctx: RunContext) -> None:
        await asyncio.wait_for(asyncio.sleep(30), timeout=0.01)

    job, _ = await job_with_run(store, retry=RetryPolicy(max_attempts=1))
    assert await worker.run_once() == 1
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.FAILED, "TimeoutError")


async def test_a_short_timeout_is_kept_while_a_long_one_runs(store: Store) -> None:
    # The watchdog sleeps until the soonest deadline: a run that starts later with a
    # sooner deadline must wake it early.
    worker = Worker(store, FAST)
    started = threading.Event()

    @worker.handler("long")
    async def long(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(60)

    @worker.handler("noop")
    async def short(ctx: RunContext) -> None:
        await asyncio.sleep(60)

    long_job, _ = await job_with_run(store, action={"type": "handler", "name": "long"})
    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        t0 = time.monotonic()
        job, _ = await job_with_run(store, timeout_seconds=0.3, retry=RetryPolicy(max_attempts=1))
        await eventually(lambda: _state_is(store, job.id, "dead"))
        assert time.monotonic() - t0 < 10  # not after the long run's 300 s
        assert await run_states(store, long_job.id) == ["running"]
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT


async def test_runs_due_at_one_instant_all_start_at_it(store: Store) -> None:
    worker = Worker(store, replace(FAST, pools={"default": 50}))
    starts: dict[int, float] = {}

    @worker.handler("noop")
    async def record(ctx: RunContext) -> None:
        starts[ctx.run_id] = time.time()

    due = datetime.now(UTC) + timedelta(seconds=0.4)
    jobs = [make_job(action={"type": "handler", "name": "noop"}) for _ in range(40)]
    runs = [make_run(j, due) for j in jobs]
    await store.create_jobs(jobs, runs)
    async with running(worker):
        await eventually(lambda: _true(len(starts) == 40))
    lags = [t - due.timestamp() for t in starts.values()]
    assert min(lags) >= -0.002 and max(lags) < 1.0, (min(lags), max(lags))


async def test_an_unknown_handler_fails_with_a_clear_error(store: Store) -> None:
    worker = Worker(store, FAST)
    job, _ = await job_with_run(store, retry=RetryPolicy(max_attempts=1))
    await worker.run_once()
    run = await one_run(store, job.id)
    assert run.state is RunState.DEAD
    assert "no handler named 'noop'" in (run.last_error or "")


async def test_cancelling_a_running_run_reaches_the_handler_at_its_next_heartbeat(
    store: Store,
) -> None:
    worker = Worker(store, FAST)
    started = threading.Event()

    @worker.handler("noop")
    def loop_until_cancelled(ctx: RunContext) -> None:
        started.set()
        while True:
            ctx.heartbeat()  # raises RunCancelled once the worker hears of the cancel
            time.sleep(0.01)

    job, _ = await job_with_run(store)
    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        run = await one_run(store, job.id)
        await store.cancel_run("default", run.id, now=await store.now(), actor="ops")
        await eventually(lambda: _state_is(store, job.id, "cancelled"))
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED


async def test_a_worker_that_lost_its_lease_cannot_complete_the_run(store: Store) -> None:
    slow_worker = Worker(store, FAST)
    release = threading.Event()
    started = threading.Event()

    @slow_worker.handler("noop")
    def stuck(ctx: RunContext) -> None:
        started.set()
        release.wait(30)

    job, _ = await job_with_run(store)
    claim_task = asyncio.create_task(slow_worker.run_once())
    await eventually(lambda: _true(started.is_set()))

    async def start_stored() -> bool:  # written beside the action (issue 26)
        return (await one_run(store, job.id)).started_at is not None

    await eventually(start_stored)
    # its lease is taken over: rescued as if expired, then claimed by another worker
    later = await store.now() + timedelta(seconds=60)
    await store.rescue_expired(now=later)
    [taken] = await store.claim_runs(
        "w2", ["default"], limit=1, now=later, prefetch_until=later, lease_seconds=60
    )
    release.set()
    await claim_task
    run = await one_run(store, job.id)
    assert (run.state, run.lease_owner, run.fence) == (RunState.RUNNING, "w2", taken.run.fence)
    outcomes = [a.outcome for a in await store.list_attempts("default", run.id)]
    assert outcomes == [AttemptOutcome.LOST]  # the stale success was refused


async def test_runs_fire_on_time_never_early(store: Store) -> None:
    worker = Worker(store, FAST)
    starts: dict[int, float] = {}

    @worker.handler("noop")
    def record(ctx: RunContext) -> None:
        starts[ctx.run_id] = time.time()

    jobs = [await job_with_run(store, due_in=0.3 + i * 0.05) for i in range(8)]
    async with running(worker):
        await eventually(lambda: _true(len(starts) == 8))
    for job, new_run in jobs:
        run = await one_run(store, job.id)
        lag = starts[run.id] - new_run.available_at.timestamp()
        assert -0.002 <= lag < 1.0, lag  # store and worker share this machine's clock
        [attempt] = await store.list_attempts("default", run.id)
        assert attempt.lag_seconds is not None and attempt.lag_seconds >= 0


async def test_shutdown_releases_what_did_not_finish_in_the_grace_period(store: Store) -> None:
    # A long prefetch: the waiting run is claimed well before its instant, and the stop
    # comes before it.
    worker = Worker(store, replace(FAST, prefetch_seconds=60))
    started = threading.Event()

    @worker.handler("noop")
    async def forever(ctx: RunContext) -> None:
        started.set()
        await asyncio.sleep(60)

    job, _ = await job_with_run(store)
    waiting, planned = await job_with_run(store, due_in=30)
    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        await eventually(lambda: _state_is(store, waiting.id, "running"))
    assert await run_states(store, job.id) == ["pending"]
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.CANCELLED, "WorkerShutdown")
    # Released before it started: no attempt, nothing spent, still due at its instant.
    later = await one_run(store, waiting.id)
    assert (later.state, later.attempt, later.max_attempts, later.available_at) == (
        RunState.PENDING,
        0,
        3,
        planned.available_at,
    )
    assert await store.list_attempts("default", later.id) == []


async def test_shutdown_starts_no_run_that_waits_for_a_slot(store: Store) -> None:
    """A run due but waiting for a slot behind the executing ones has not started: the
    stop releases it at once (no attempt), instead of starting it during the grace period
    and cutting it at its end (issue 26: a drain under load started hundreds of runs)."""
    worker = Worker(store, replace(FAST, pools={"default": 1}, grace_seconds=10.0))
    started: list[str] = []
    release = asyncio.Event()

    @worker.handler("noop")
    async def slow(ctx: RunContext) -> None:
        started.append(ctx.job_id)
        await release.wait()

    first, _ = await job_with_run(store)
    async with running(worker):
        await eventually(lambda: _true(len(started) == 1))
        # Claimed ahead past the free slots (a saturated pool holds one batch more): it
        # waits for the one slot, which the first run holds.
        second, _ = await job_with_run(store)
        await eventually(lambda: _state_is(store, second.id, "running"))
        stopping = asyncio.get_running_loop().call_later(0.2, release.set)
    stopping.cancel()
    assert len(started) == 1  # the one executing finished within its grace period
    done = await one_run(store, started[0])
    other = await one_run(store, (second if started[0] == first.id else first).id)
    assert done.state is RunState.SUCCEEDED
    assert (other.state, other.attempt) == (RunState.PENDING, 0)
    assert await store.list_attempts("default", other.id) == []


async def test_shutdown_never_sends_a_started_at_most_once_run_back(store: Store) -> None:
    # A prefetch window wide enough that the second run is surely claimed, and surely not
    # started, when the worker stops, however slow the machine is.
    worker = Worker(store, replace(FAST, prefetch_seconds=30.0))
    started = threading.Event()
    starts: Counter[str] = Counter()

    @worker.handler("noop")
    async def forever(ctx: RunContext) -> None:
        starts[ctx.job_id] += 1
        started.set()
        await asyncio.sleep(60)

    once = {"delivery": Delivery.AT_MOST_ONCE, "retry": RetryPolicy(max_attempts=1)}
    job, _ = await job_with_run(store, **once)
    waiting, _ = await job_with_run(store, due_in=3, **once)

    async def waiting_claimed() -> bool:
        return (await one_run(store, waiting.id)).state is RunState.RUNNING

    async with running(worker):
        await eventually(lambda: _true(started.is_set()))
        await eventually(waiting_claimed)
    run = await one_run(store, job.id)
    assert (run.state, run.reason) == (RunState.DEAD, REASON_AT_MOST_ONCE_STOPPED)
    # The one that had not started yet keeps its single start for the next worker, and
    # its history holds no attempt for a claim that never started.
    later = await one_run(store, waiting.id)
    assert (later.state, later.attempt, later.max_attempts) == (RunState.PENDING, 0, 1)
    assert await store.list_attempts("default", later.id) == []
    again = Worker(store, FAST)
    again.handler("noop")(forever)
    async with running(again):
        await eventually(lambda: _true(starts[waiting.id] == 1))
    assert starts == {job.id: 1, waiting.id: 1}
    assert await run_states(store, waiting.id) == ["dead"]
    attempts = await store.list_attempts("default", later.id)
    assert [(a.attempt, a.worker_id) for a in attempts] == [(1, again.id)]


async def _state_is(store: Store, job_id: str, state: str) -> bool:
    return await run_states(store, job_id) == [state]


async def _true(value: bool) -> bool:
    return value


async def test_a_running_worker_is_registered_and_forgotten_when_it_stops(store: Store) -> None:
    worker = Worker(store, FAST)
    since = await store.now() - timedelta(minutes=1)
    async with running(worker):
        workers = await eventually(lambda: store.list_workers(SHARED_WORKERS, seen_since=since))
        [me] = workers
        assert (me.id, me.pools, me.capacity) == (worker.id, ("default",), 4)
    assert await store.list_workers(SHARED_WORKERS, seen_since=since) == []


async def test_a_retry_claimed_while_the_failed_attempt_is_written_still_starts(
    store: Store,
) -> None:
    # The store answers a completion late (it is committed: the run is already pending
    # for its retry), so this worker claims the retry, due 0.4 s later, before it hears
    # back. The late answer must not make it forget the new claim, which would then never
    # start and sit "running" until its lease ran out, to end as a false "lost" attempt.
    written = store.complete_runs

    async def answer_late(batch: Any) -> Any:
        accepted = await written(batch)
        await asyncio.sleep(0.3)
        return accepted

    store.complete_runs = answer_late  # type: ignore[method-assign]
    worker = Worker(store, replace(FAST, lease_seconds=30.0, heartbeat_seconds=0.2))
    starts: Counter[int] = Counter()

    @worker.handler("noop")
    async def fails_once(ctx: RunContext) -> None:
        starts[ctx.attempt] += 1
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")

    retry = RetryPolicy(max_attempts=3, backoff=Backoff.FIXED, initial_delay=0.4, max_delay=0.4)
    job, _ = await job_with_run(store, retry=retry)

    async def succeeded() -> bool:
        return (await one_run(store, job.id)).state is RunState.SUCCEEDED

    async with running(worker):
        await eventually(succeeded, timeout=10)
    run = await one_run(store, job.id)
    assert (run.attempt, dict(starts)) == (2, {1: 1, 2: 1})
    outcomes = [a.outcome for a in await store.list_attempts(run.tenant_id, run.id)]
    assert outcomes == [AttemptOutcome.FAILED, AttemptOutcome.SUCCEEDED]


async def test_a_saturated_worker_claims_only_what_it_can_start(store: Store) -> None:
    # Issue 26: a worker claimed up to 4 x its concurrency of due runs, most of which
    # waited in it for a slot (held from the other workers, charged if it died). Runs
    # due now are claimed for free slots only; more once slots free up.
    job = replace(make_job(action={"type": "handler", "name": "block"}), next_fire_at=None)
    now = datetime.now(UTC)
    await store.create_jobs([job], [make_run(job, now - timedelta(seconds=i)) for i in range(50)])
    release = threading.Event()
    worker = Worker(store, replace(FAST, pools={"default": 3}))
    worker.handlers.register("block", lambda ctx: release.wait(30))
    try:
        # Its slots' worth, which begin at once, and one batch more, claimed ahead: they
        # wait for a slot, with no start recorded (charged nothing if the worker dies).
        assert await worker.claim() == 6
        runs = await store.list_runs("default", job_id=job.id, state=RunState.RUNNING)
        assert sorted(r.started_at is None for r in runs) == [False] * 3 + [True] * 3
        assert await worker.claim() == 0  # every slot and the batch ahead: nothing more
        assert await worker.claim(peek=True) > 0  # but a peek still takes a few (fairness)
    finally:
        release.set()
        await worker._release(list(worker._inflight.values()), "test over")


async def test_runs_due_later_are_claimed_ahead_once_nothing_due_is_left(store: Store) -> None:
    # The prefetch is for runs due within the window: their timers start them on time.
    job = replace(make_job(action={"type": "handler", "name": "block"}), next_fire_at=None)
    now = datetime.now(UTC)
    due = [make_run(job, now - timedelta(seconds=1))]
    later = [make_run(job, now + timedelta(seconds=0.4, milliseconds=i)) for i in range(20)]
    await store.create_jobs([job], [*due, *later])
    release = threading.Event()
    worker = Worker(store, replace(FAST, pools={"default": 3}))
    worker.handlers.register("block", lambda ctx: release.wait(30))
    try:
        assert await worker.claim() == 1  # the due run: one claim statement a turn
        assert await worker.claim() == 11  # nothing due: 11 more ahead, 3 x 4 held
        assert len(worker._instants) == 11
    finally:
        release.set()
        await worker._release(list(worker._inflight.values()), "test over")


async def test_a_heartbeat_that_raced_a_retry_claim_does_not_stop_the_retry(
    store: Store,
) -> None:
    # A heartbeat sent for a run's old fence came back "lost" after the run's completion
    # was written and its retry claimed under a new fence: the worker stopped the retry,
    # which then sat running until its lease lapsed (found by CI under load).
    job = replace(make_job(action={"type": "handler", "name": "block"}), next_fire_at=None)
    await store.create_jobs([job], [make_run(job, datetime.now(UTC))])
    release = threading.Event()
    worker = Worker(store, replace(FAST, pools={"default": 1}))
    worker.handlers.register("block", lambda ctx: release.wait(30))
    try:
        assert await worker.claim() == 1
        [first] = list(worker._inflight.values())
        sent = dict(worker._inflight)  # what a heartbeat is sent for
        now = datetime.now(UTC)
        retry = Completion(
            run_id=first.claimed.run.id,
            fence=first.claimed.run.fence,
            worker_id=worker.id,
            state=RunState.PENDING,
            outcome=AttemptOutcome.FAILED,
            started_at=now,
            finished_at=now,
            available_at=now,
        )
        assert await store.complete_runs([retry]) == [first.claimed.run.id]
        worker._forget(first)
        assert await worker.claim() == 1  # the retry, under the next fence
        [second] = list(worker._inflight.values())
        assert second.claimed.run.fence > first.claimed.run.fence
        old = [(first.claimed.run.id, first.claimed.run.fence)]
        result = await store.heartbeat(worker.id, old, now=now, lease_seconds=30)
        assert result.lost == [first.claimed.run.id]
        worker._apply_heartbeat(result, sent)
        assert not second.lost and not second.ctx.cancelled.is_set()
    finally:
        release.set()
        await worker._release(list(worker._inflight.values()), "test over")


async def test_a_full_worker_claims_a_run_enqueued_meanwhile_at_once(store: Store) -> None:
    """A worker saturated by one tenant claims another tenant's new run at its
    notification (a peek past the limit), not after the batch it holds: it then starts
    at the next free slot (decision 0028, W6)."""
    config = replace(FAST, pools={"default": 1}, prefetch_factor=1)
    worker = Worker(store, config)
    release = asyncio.Event()

    @worker.handler("block")
    async def block(ctx: RunContext) -> None:
        await release.wait()

    @worker.handler("noop")
    async def noop(ctx: RunContext) -> None:
        pass

    await store.ensure_tenant("bobco", "Bobco", now=datetime.now(UTC))
    busy, _ = await job_with_run(store, action={"type": "handler", "name": "block"})
    async with running(worker):
        await eventually(lambda: _state_is(store, busy.id, "running"))
        other = replace(make_job(tenant_id="bobco"), next_fire_at=None)
        await store.create_jobs([other], [make_run(other, datetime.now(UTC))])
        # The worker holds its one run and has no room: only a peek can claim this one.
        [claimed] = await eventually(lambda: _runs_in(store, "bobco", other.id, "running"), 10)
        assert claimed.lease_owner == worker.id
        assert not release.is_set()
        release.set()
        await eventually(lambda: _runs_in(store, "bobco", other.id, "succeeded"))


async def _runs_in(store: Store, tenant: str, job_id: str, state: str) -> list[Any]:
    return [r for r in await store.list_runs(tenant, job_id=job_id) if r.state == state]


async def test_a_heartbeat_that_raced_a_completion_does_not_call_the_run_lost(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch of completions written while a heartbeat's write was in flight: the
    heartbeat finds those runs no longer running. They finished; no lease was lost."""
    worker = Worker(store, FAST)

    @worker.handler("noop")
    async def noop(ctx: RunContext) -> None:
        pass

    await job_with_run(store)
    assert await worker.claim() == 1
    [flight] = worker._inflight.values()
    assert flight.task is not None
    await flight.task  # the handler ran; its completion is queued, not yet written
    # The completion loop's write lands first (the worker has not read its answer yet).
    await store.complete_runs([worker._completions.get_nowait()])
    with caplog.at_level(logging.WARNING, "cronwheel.worker"):
        await worker.heartbeat()
    assert "lease lost" not in caplog.text
    assert not flight.lost


@pytest.mark.both_stores  # the stores differ here: SQL on PostgreSQL, lifecycle on SQLite
async def test_a_run_begun_before_its_start_was_stored_is_never_run_again_as_the_same_attempt(
    store: Store,
) -> None:
    # Found by the overload chaos test: a run claimed ahead begins while its start is
    # written beside it. Under load that write (or the completion that carries the start
    # of a run that ended first) lands after the lease expired: the rescue found no start,
    # took the run for one that never began, and gave its attempt back. Claimed again, it
    # ran a second time as the same attempt, and the first execution was recorded nowhere.
    # Here the store takes both writes late (held until the end), deterministically.
    held = asyncio.Event()
    mark, complete = store.mark_started, store.complete_runs

    async def late_mark(worker_id: str, starts: Any) -> Any:
        await held.wait()
        return await mark(worker_id, starts)

    async def late_complete(batch: Any) -> Any:
        await held.wait()
        return await complete(batch)

    store.mark_started = late_mark  # type: ignore[method-assign]
    store.complete_runs = late_complete  # type: ignore[method-assign]
    worker = Worker(store, replace(FAST, lease_seconds=30.0))
    executed: list[tuple[int, int]] = []

    @worker.handler("noop")
    async def noop(ctx: RunContext) -> None:
        executed.append((ctx.attempt, ctx.fence))

    job, _ = await job_with_run(store, due_in=0.2)  # within the prefetch: claimed ahead
    first = asyncio.create_task(worker.run_once())
    try:
        await eventually(lambda: _true(len(executed) == 1))
        [(attempt, fence)] = executed
        assert (await one_run(store, job.id)).started_at is None  # its start not stored yet
        # Its lease runs out meanwhile (a loop or a database starved of CPU), and another
        # worker claims the run.
        later = await store.now() + timedelta(seconds=60)
        await store.rescue_expired(now=later)
        [again] = await store.claim_runs(
            "w2", ["default"], limit=1, now=later, prefetch_until=later, lease_seconds=60
        )
        # A duplicate only under a newer fence *and* a newer attempt, the lost one recorded
        # (by its worker, with its fence), and not charged: the budget grew by one.
        assert again.run.fence > fence
        assert (again.run.attempt, again.run.max_attempts) == (attempt + 1, 4)
        [lost] = await store.list_attempts("default", again.run.id)
        assert (lost.attempt, lost.fence, lost.worker_id, lost.outcome) == (
            attempt,
            fence,
            worker.id,
            AttemptOutcome.LOST,
        )
        assert lost.started_at is None  # it may not have begun: nothing says when
    finally:
        held.set()
        await first
    # The late writes changed nothing: the run is the other worker's.
    run = await one_run(store, job.id)
    assert (run.state, run.lease_owner, run.attempt) == (RunState.RUNNING, "w2", attempt + 1)
    assert [a.outcome for a in await store.list_attempts("default", run.id)] == [
        AttemptOutcome.LOST
    ]


async def test_a_peek_claims_while_every_pooled_connection_is_busy(pg_dsn: str) -> None:
    """A saturated worker's claims and completions hold the store's pooled connections;
    its peek at an enqueue is made on a connection of its own (decision 0037, addendum),
    so it waits for none of them and for no per-claim setting or reset."""
    from cronwheel.store.postgres import PostgresStore

    store = await PostgresStore.connect(pg_dsn, max_size=1)
    try:
        await store.migrate()
        await store.truncate_all_for_tests()
        worker = Worker(store, FAST)
        assert await worker.claim() == 0  # nothing yet (and the pools' rate limits read)
        await job_with_run(store)
        async with store._connection():  # the pool's only connection, busy
            assert await asyncio.wait_for(worker.claim(peek=True), 10) == 1
        [flight] = worker._inflight.values()
        await worker._release([flight], "test over")
    finally:
        await store.close()


async def test_a_run_enqueued_while_the_loop_is_saturated_begins_before_the_work_queued(
    pg_dsn: str,
) -> None:
    """Issue 26, W6: a worker whose loop is saturated (thousands of callbacks queued, as
    when it begins a claim of thousands of runs) starts a run enqueued meanwhile without
    waiting for them. Its peek reads the notification, claims and begins the run urgently
    (decision 0037, "Urgent work first"); on asyncio's own loop each of those steps waits
    for every queued callback. Counted in rounds of the queue, not in time: a round here
    is 2,000 callbacks of 50 µs each (about 0.1 s), and the peek's path takes at least
    six rounds when it is not urgent."""
    from cronwheel.store.postgres import PostgresStore

    loop = asyncio.get_running_loop()
    assert isinstance(loop, eventloop.PriorityEventLoop)
    store = await PostgresStore.connect(pg_dsn)
    try:
        await store.migrate()
        await store.truncate_all_for_tests()
        worker = Worker(store, FAST)
        began: list[int] = []
        rounds = 0

        @worker.handler("noop")
        async def noop(ctx: RunContext) -> None:
            began.append(rounds)

        def busy() -> None:
            until = time.perf_counter() + 50e-6
            while time.perf_counter() < until:
                pass

        flooding = True

        async def flood() -> None:
            nonlocal rounds
            while flooding:
                rounds += 1
                for _ in range(2000):
                    loop.call_soon(busy)
                await asyncio.sleep(0)

        async with running(worker):
            await job_with_run(store)  # the peek's connections opened, as in a running worker
            await eventually(lambda: _true(len(began) == 1))
            flooder = asyncio.create_task(flood())
            await eventually(lambda: _true(rounds >= 3))  # saturated before the enqueue
            enqueued_at = rounds
            # Enqueued urgently too: the test's own awaits must not wait for rounds.
            await asyncio.create_task(job_with_run(store), context=eventloop.urgent_context())
            await eventually(lambda: _true(len(began) == 2), timeout=120)
            flooding = False
            await flooder
        assert began[1] - enqueued_at <= 2, (enqueued_at, began)
    finally:
        await store.close()


@pytest.mark.parametrize("due_in", [0.0, 0.3], ids=["due-now", "at-an-instant"])
async def test_a_peeks_runs_of_a_tenant_holding_several_take_their_turn(
    store: Store, due_in: float
) -> None:
    """Issue 26, W4: a peek's claim is urgent (its answer is read first), but what it
    claims begins urgently only as any claim's runs do: a tenant's only run. Taken
    urgently, 200 cron runs of one tenant due at one instant began a turn's worth at a
    time with the loop's other work between (W4's p99 26-31 ms against 16-20), and a
    tenant's burst would jump every other tenant's queue. Both paths: runs due at once
    (begun in the claim's step) and runs claimed ahead (begun by their instant's timer);
    a's first run, begun while its other runs are still being started, counts them."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, eventloop.PriorityEventLoop)
    worker = Worker(store, replace(FAST, pools={"default": 50}))
    ran = 0  # queued callbacks that have run
    began: dict[str, list[int]] = {}

    @worker.handler("noop")
    async def noop(ctx: RunContext) -> None:
        began.setdefault(ctx.tenant_id, []).append(ran)

    flooding = True

    def filler() -> None:  # each puts its successor at the back: the queue never empties
        nonlocal ran
        ran += 1
        if flooding:
            loop.call_soon(filler)

    now = datetime.now(UTC)
    due = now + timedelta(seconds=due_in)
    jobs, runs = [], []
    for tenant, count in (("a", 20), ("b", 1)):
        await store.ensure_tenant(tenant, tenant, now=now)
        for _ in range(count):
            job = replace(make_job(tenant_id=tenant), next_fire_at=None)
            jobs.append(job)
            runs.append(make_run(job, due))
    await store.create_jobs(jobs, runs)
    for _ in range(2000):
        loop.call_soon(filler)
    try:
        peek = asyncio.create_task(worker.claim(peek=True), context=eventloop.urgent_context())
        assert await peek == 21
        await eventually(lambda: _true(len(began.get("a", [])) == 20 and "b" in began))
    finally:
        flooding = False
    await worker._flush_all()
    # b's run before any queued callback ran on; a's behind the 2,000 queued with them.
    assert max(began["b"]) + 1000 < min(began["a"]), began


async def test_a_peek_claims_for_the_tenant_its_notification_names(pg_dsn: str) -> None:
    """Issue 26, W6: beside another tenant's backlog the peek's fair claim over both is
    the heaviest statement it can make (16-20 ms during a 100,000-run drain, 2.5 ms
    alone). An enqueue's notification names its tenant, and the peek claims for that
    tenant alone: the lean statement, since b uses no claim policy, where a's waiting
    keyed run makes every claim over both tenants the full one."""
    from cronwheel.store.postgres import PostgresStore

    store = await PostgresStore.connect(pg_dsn)
    try:
        await store.migrate()
        await store.truncate_all_for_tests()
        now = datetime.now(UTC)
        for tenant in ("a", "b"):
            await store.ensure_tenant(tenant, tenant, now=now)
        keyed = replace(make_job(tenant_id="a"), next_fire_at=None)
        await store.create_jobs(
            [keyed],
            [make_run(keyed, now + timedelta(hours=1), concurrency_key="k", concurrency_limit=1)],
        )
        worker = Worker(store, FAST)
        ran: list[str] = []

        @worker.handler("noop")
        async def noop(ctx: RunContext) -> None:
            ran.append(ctx.tenant_id)

        async with running(worker):
            # The worker's claims so far: a's keyed run waits, so every one is the full.
            await eventually(lambda: _true(store.claims_by_statement["full"] >= 2))
            assert store.claims_by_statement["lean"] == 0
            job = replace(make_job(tenant_id="b", schedule={"kind": "manual"}), next_fire_at=None)
            await store.create_jobs([job])
            await store.enqueue_runs(make_run(job, datetime.now(UTC)), [None])
            await eventually(lambda: _true(ran == ["b"]))
        assert store.claims_by_statement["lean"] >= 1
    finally:
        await store.close()


async def test_a_tenants_only_run_begins_before_the_steps_of_the_runs_in_flight(
    store: Store,
) -> None:
    """Whichever claim brings it (here the claim loop's, not a peek), a run of a tenant
    holding no other run in the worker begins ahead of the callbacks already queued (a
    saturating tenant's steps); a tenant that holds other runs takes its turn."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, eventloop.PriorityEventLoop)
    worker = Worker(store, FAST)
    ran = 0  # queued callbacks that have run
    began: dict[str, list[int]] = {}

    @worker.handler("noop")
    async def noop(ctx: RunContext) -> None:
        began.setdefault(ctx.tenant_id, []).append(ran)

    def filler() -> None:
        nonlocal ran
        ran += 1

    flooding = True

    async def flood() -> None:  # always a queue of callbacks ahead of anything new
        while flooding:
            for _ in range(2000):
                loop.call_soon(filler)
            await asyncio.sleep(0)

    for tenant in ("a", "b"):
        await store.ensure_tenant(tenant, tenant, now=datetime.now(UTC))
    for tenant in ("a", "a", "b"):
        await job_with_run(store, tenant_id=tenant)
    flooder = asyncio.create_task(flood())
    try:
        assert await worker.claim() == 3
        claimed_at = ran  # the runs were begun in the step that returned
        await eventually(lambda: _true(len(began.get("a", [])) == 2 and "b" in began))
    finally:
        flooding = False
        await flooder
    await worker._flush_all()
    assert began["b"] == [claimed_at]  # before any queued callback ran
