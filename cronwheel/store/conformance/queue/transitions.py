"""Contract: every run transition a store makes is the one cronwheel.core.lifecycle decides
(decision 0040).

The table below walks every (state, event) pair of ``lifecycle.STATE_EVENTS`` (a test
fails if one has no case) through each store: SQLite calls the lifecycle functions, and
PostgreSQL keeps set-based SQL for its batched paths (claim, complete, rescue, release,
replay), so each case drives the store, then requires the run it left to read exactly as
the function's verdict says: state, attempt, budget, next due time, finish, reason and
error, and the attempt row it recorded.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import pytest

from cronwheel.core import lifecycle
from cronwheel.core.lifecycle import STATE_EVENTS, Event, Outcome, OutcomeKind, Transition
from cronwheel.core.model import (
    REASON_OVERLAP_SKIP,
    Backoff,
    ClaimedRun,
    Delivery,
    Job,
    Overlap,
    RetryPolicy,
    Run,
    RunState,
    new_id,
)
from cronwheel.core.pipelines.definition import parse_definition
from cronwheel.core.pipelines.model import Pipeline, PipelineRunStart
from cronwheel.store.base import Completion, Release, Start, Store
from cronwheel.store.conformance.factories import T0, at, make_job, make_run

TTL = 30.0
"""Every claim's lease: a run claimed at ``at(0)`` has its lease expire at ``at(30)``."""
RESCUE_AT = at(31)
RETRY = RetryPolicy(max_attempts=3, backoff=Backoff.FIXED, initial_delay=60, max_delay=600)


@dataclass(frozen=True, slots=True)
class Given:
    """What a case leaves for the check: the run before and after the event, what the
    lifecycle said, and the attempt row it expects (outcome, error class), if any."""

    before: Run
    after: Run
    expected: Transition
    recorded: tuple[str, str | None] | None = None


Case = Callable[[Store], Awaitable[Given]]
CASES: dict[str, tuple[RunState, Event, Case]] = {}


def case(state: RunState, event: Event, name: str) -> Callable[[Case], Case]:
    def register(fn: Case) -> Case:
        CASES[name] = (state, event, fn)
        return fn

    return register


async def _run(store: Store, run_id: int) -> Run:
    found = await store.get_run("default", run_id)
    assert found is not None
    return found


async def _job(store: Store, **overrides: Any) -> Job:
    """A job with one run due at ``at(-1)``, of the budget its policies give."""
    job = make_job(**{"retry": RETRY, "next_fire_at": None, **overrides})
    await store.create_jobs([job])
    budget = lifecycle.attempt_budget(job.retry, job.delivery)
    await store.materialize_runs([make_run(job, at(-1), max_attempts=budget)], [])
    return job


async def _claim(store: Store, *, now: datetime = T0, started: bool = True) -> ClaimedRun:
    [claimed] = await store.claim_runs(
        "w1",
        ["default"],
        limit=1,
        now=now,
        prefetch_until=now,
        lease_seconds=TTL,
        started=started,
    )
    return claimed


async def _complete(store: Store, claimed: ClaimedRun, outcome: Outcome) -> Given:
    before = await _run(store, claimed.run.id)
    done = lifecycle.completion_for(
        claimed,
        outcome,
        worker_id="w1",
        started_at=at(1),
        finished_at=at(2),
        rng=random.Random(7),
    )
    assert await store.complete_runs([done]) == [claimed.run.id]
    after = await _run(store, claimed.run.id)
    return Given(before, after, _completed(before, done), (done.outcome.value, done.error_class))


def _completed(run: Run, done: Completion) -> Transition:
    """The run a completion leaves: the completion is the verdict (completion_for)."""
    return Transition(
        state=done.state,
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        available_at=done.available_at or run.available_at,
        finished_at=done.finished_at if done.state.finished else None,
        reason=done.reason or run.reason,
        last_error=done.error_message,
    )


# -- claim, start, completions ----------------------------------------------------------


@case(RunState.PENDING, Event.CLAIM, "claim")
async def _claim_a_run(store: Store) -> Given:
    job = await _job(store)
    [pending] = await store.list_runs("default", job_id=job.id)
    claimed = await _claim(store)
    after = await _run(store, claimed.run.id)
    assert (after.fence, after.lease_owner) == (pending.fence + 1, "w1")
    assert after.lease_expires_at == at(TTL) and after.started_at == T0
    assert claimed == _claimed_as_lifecycle_says(claimed.run, job)
    expected = replace(_unchanged(pending), state=RunState.RUNNING, attempt=1)
    return Given(pending, after, expected)


@case(RunState.PENDING, Event.SKIP, "overlap skip at claim")
async def _skip(store: Store) -> Given:
    job = await _job(store, overlap=Overlap.SKIP)
    await _claim(store)
    await store.materialize_runs([make_run(job, at(0), overlap=Overlap.SKIP)], [])
    [later] = [r for r in await store.list_runs("default", job_id=job.id) if r.state == "pending"]
    assert len(await store.claim_runs("w2", ["default"], **_at(1))) == 0
    after = await _run(store, later.id)
    expected = replace(
        _unchanged(later), state=RunState.SKIPPED, finished_at=at(1), reason=REASON_OVERLAP_SKIP
    )
    return Given(later, after, expected)


@case(RunState.RUNNING, Event.START, "start of a run claimed ahead")
async def _start(store: Store) -> Given:
    await _job(store)
    claimed = await _claim(store, started=False)
    before = await _run(store, claimed.run.id)
    assert before.started_at is None
    assert await store.mark_started("w1", [Start(before.id, before.fence, at(1))]) == [before.id]
    after = await _run(store, before.id)
    assert after.started_at == at(1) and after.lease_owner == "w1"
    return Given(before, after, replace(_unchanged(before), state=RunState.RUNNING))


@case(RunState.RUNNING, Event.SUCCEED, "success")
async def _succeed(store: Store) -> Given:
    await _job(store)
    return await _complete(store, await _claim(store), Outcome(OutcomeKind.SUCCEEDED))


@case(RunState.RUNNING, Event.FAIL, "failure with attempts left")
async def _fail_retry(store: Store) -> Given:
    await _job(store)
    given = await _complete(store, await _claim(store), Outcome(OutcomeKind.FAILED, "E", "e"))
    assert given.after.state is RunState.PENDING and given.after.available_at == at(62)
    return given


@case(RunState.RUNNING, Event.FAIL, "failure on the last attempt")
async def _fail_last(store: Store) -> Given:
    await _job(store, retry=replace(RETRY, max_attempts=1))
    claimed = await _claim(store)
    given = await _complete(store, claimed, Outcome(OutcomeKind.TIMED_OUT, "Timeout", "slow"))
    assert given.after.state is RunState.DEAD
    return given


@case(RunState.RUNNING, Event.FAIL, "permanent failure")
async def _fail_permanent(store: Store) -> Given:
    await _job(store)
    return await _complete(store, await _claim(store), Outcome(OutcomeKind.PERMANENT, "P", "4xx"))


@case(RunState.RUNNING, Event.FAIL, "at-most-once failure")
async def _fail_at_most_once(store: Store) -> Given:
    await _job(store, delivery=Delivery.AT_MOST_ONCE)
    given = await _complete(store, await _claim(store), Outcome(OutcomeKind.FAILED, "E", "e"))
    assert given.after.state is RunState.DEAD
    return given


@case(RunState.RUNNING, Event.STOP, "stopped on a cancel")
async def _stop(store: Store) -> Given:
    await _job(store)
    claimed = await _claim(store)
    await store.cancel_run("default", claimed.run.id, now=at(1), actor="alice")
    return await _complete(store, claimed, Outcome(OutcomeKind.CANCELLED))


# -- lost leases ------------------------------------------------------------------------


async def _rescued(
    store: Store, claimed: ClaimedRun, job: Job, *, gone: bool = False, now: datetime = RESCUE_AT
) -> Given:
    before = await _run(store, claimed.run.id)
    if gone:
        await store.rescue_runs_of_dead_owner(["w1"], now=now)
    else:
        await store.rescue_expired(now=now)
    after = await _run(store, before.id)
    expected = lifecycle.rescue(before, delivery=job.delivery, now=now, gone=gone)
    recorded = None
    if expected.recorded is not None:
        recorded = (expected.recorded.value, expected.error_class)
    return Given(before, after, expected, recorded)


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of a started run")
async def _lost(store: Store) -> Given:
    job = await _job(store)
    return await _rescued(store, await _claim(store), job)


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "a started run's worker proved dead")
async def _lost_gone(store: Store) -> Given:
    job = await _job(store)
    return await _rescued(store, await _claim(store), job, gone=True)


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry on the last attempt")
async def _lost_last(store: Store) -> Given:
    job = await _job(store, retry=replace(RETRY, max_attempts=1))
    given = await _rescued(store, await _claim(store), job)
    assert given.after.state is RunState.DEAD
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of an at-most-once run")
async def _lost_at_most_once(store: Store) -> Given:
    job = await _job(store, delivery=Delivery.AT_MOST_ONCE)
    given = await _rescued(store, await _claim(store), job)
    assert given.after.state is RunState.DEAD
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of a run claimed ahead")
async def _lost_unstarted(store: Store) -> Given:
    """At-most-once: its start is stored before it begins, so it never began: unclaimed."""
    job = await _job(store, delivery=Delivery.AT_MOST_ONCE)
    given = await _rescued(store, await _claim(store, started=False), job)
    assert given.after.state is RunState.PENDING and given.after.attempt == 0
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of a replay claimed ahead")
async def _lost_unstarted_replay(store: Store) -> Given:
    """Unclaimed, the run's start goes back to its previous attempt's."""
    job = await _job(store, delivery=Delivery.AT_MOST_ONCE)
    dead = (
        await _complete(store, await _claim(store), Outcome(OutcomeKind.FAILED, "E", "e"))
    ).after
    await _replayed(store, dead, job)
    claimed = await _claim(store, now=at(100), started=False)
    given = await _rescued(store, claimed, job, now=at(131))
    [first] = await store.list_attempts("default", given.after.id)
    assert given.after.attempt == 1 and given.after.started_at == first.started_at == at(1)
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of a retry claimed ahead")
async def _lost_unstarted_retry(store: Store) -> Given:
    """At-least-once: its start is stored beside its action, so it may have begun: a lost
    attempt without a start, not charged (one more in its budget), due when it was."""
    job = await _job(store, retry=replace(RETRY, initial_delay=0))
    await _complete(store, await _claim(store), Outcome(OutcomeKind.FAILED, "E", "e"))
    claimed = await _claim(store, now=at(5), started=False)
    given = await _rescued(store, claimed, job, now=at(36))
    first, lost = await store.list_attempts("default", given.after.id)
    assert (lost.attempt, lost.fence, lost.worker_id, lost.started_at) == (2, 2, "w1", None)
    assert (given.after.attempt, given.after.max_attempts) == (2, RETRY.max_attempts + 1)
    assert given.after.started_at is None and first.started_at == at(1)
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry of an unmarked run cancelled")
async def _lost_unstarted_cancelled(store: Store) -> Given:
    job = await _job(store)
    claimed = await _claim(store, started=False)
    await store.cancel_run("default", claimed.run.id, now=at(1), actor="alice")
    given = await _rescued(store, claimed, job, gone=True)
    assert given.after.state is RunState.CANCELLED
    return given


@case(RunState.RUNNING, Event.LEASE_EXPIRED, "lease expiry after a cancel was asked")
async def _lost_cancelled(store: Store) -> Given:
    job = await _job(store)
    claimed = await _claim(store)
    await store.cancel_run("default", claimed.run.id, now=at(1), actor="alice")
    return await _rescued(store, claimed, job)


# -- releases ---------------------------------------------------------------------------


async def _released(store: Store, claimed: ClaimedRun, job: Job, *, started: bool) -> Given:
    before = await _run(store, claimed.run.id)
    why = "worker w1 stopped"
    release = Release(before.id, before.fence, "w1", started, why)
    await store.release_runs([release], now=at(5))
    after = await _run(store, before.id)
    expected = lifecycle.release(before, started=started, why=why, delivery=job.delivery, now=at(5))
    recorded = None
    if expected.recorded is not None:
        recorded = (expected.recorded.value, expected.error_class)
    return Given(before, after, expected, recorded)


@case(RunState.RUNNING, Event.RELEASE, "release of a started run")
async def _release_started(store: Store) -> Given:
    job = await _job(store)
    given = await _released(store, await _claim(store), job, started=True)
    assert given.after.max_attempts == given.before.max_attempts + 1
    return given


@case(RunState.RUNNING, Event.RELEASE, "release before the start")
async def _release_unstarted(store: Store) -> Given:
    job = await _job(store)
    return await _released(store, await _claim(store, started=False), job, started=False)


@case(RunState.RUNNING, Event.RELEASE, "release of a started at-most-once run")
async def _release_at_most_once(store: Store) -> Given:
    job = await _job(store, delivery=Delivery.AT_MOST_ONCE)
    return await _released(store, await _claim(store), job, started=True)


@case(RunState.RUNNING, Event.RELEASE, "release after a cancel was asked")
async def _release_cancelled(store: Store) -> Given:
    job = await _job(store)
    claimed = await _claim(store)
    await store.cancel_run("default", claimed.run.id, now=at(1), actor="alice")
    return await _released(store, claimed, job, started=True)


# -- cancel -----------------------------------------------------------------------------


@case(RunState.PENDING, Event.CANCEL, "cancel of a pending run")
async def _cancel_pending(store: Store) -> Given:
    job = await _job(store)
    [before] = await store.list_runs("default", job_id=job.id)
    assert lifecycle.cancel(before.state, before.cancel_requested) is lifecycle.CancelVerdict.CANCEL
    after = await store.cancel_run("default", before.id, now=at(3), actor="alice")
    return Given(before, after, lifecycle.cancelled(before, actor="alice", now=at(3)))


@case(RunState.RUNNING, Event.CANCEL, "cancel of a running run")
async def _cancel_running(store: Store) -> Given:
    await _job(store)
    claimed = await _claim(store)
    before = await _run(store, claimed.run.id)
    assert lifecycle.cancel(before.state, before.cancel_requested) is lifecycle.CancelVerdict.ASK
    after = await store.cancel_run("default", before.id, now=at(3), actor="alice")
    assert after.cancel_requested and after.lease_owner == "w1"
    # Asking again changes nothing.
    assert await store.cancel_run("default", before.id, now=at(4), actor="bob") == after
    return Given(before, after, replace(_unchanged(before), state=RunState.RUNNING))


def _cancel_finished(state: RunState) -> Case:
    async def walk(store: Store) -> Given:
        before = await _finished(store, state)
        verdict = lifecycle.cancel(before.state, before.cancel_requested)
        assert verdict is lifecycle.CancelVerdict.NOTHING
        after = await store.cancel_run("default", before.id, now=at(90), actor="alice")
        assert after == before
        return Given(before, after, _unchanged(before))

    return walk


async def _finished(store: Store, state: RunState) -> Run:
    """A run in a finished ``state``, reached through the store."""
    if state is RunState.SKIPPED:
        return (await _skip(store)).after
    if state is RunState.CANCELLED:
        return (await _cancel_pending(store)).after
    await _job(store)
    if state is RunState.SUCCEEDED:
        return (await _complete(store, await _claim(store), Outcome(OutcomeKind.SUCCEEDED))).after
    return (await _complete(store, await _claim(store), Outcome(OutcomeKind.PERMANENT))).after


for _state in (RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED):
    case(_state, Event.CANCEL, f"cancel of a {_state.value} run")(_cancel_finished(_state))


# -- replay -----------------------------------------------------------------------------


async def _replayed(store: Store, before: Run, job: Job) -> Given:
    budget = lifecycle.replay_budget(before, job.retry, job.delivery)
    replayed = await store.replay_runs(
        "default", [before.id], extra_attempts=budget, now=at(100), actor="alice"
    )
    assert replayed == [before.id]
    after = await _run(store, before.id)
    expected = lifecycle.replay(before, budget=budget, actor="alice", now=at(100))
    assert expected is not None
    return Given(before, after, expected)


@case(RunState.DEAD, Event.REPLAY, "replay of a dead run")
async def _replay(store: Store) -> Given:
    job = await _job(store)
    dead = (await _complete(store, await _claim(store), Outcome(OutcomeKind.PERMANENT))).after
    given = await _replayed(store, dead, job)
    assert given.after.max_attempts == 1 + RETRY.max_attempts
    return given


@case(RunState.DEAD, Event.REPLAY, "replay of a dead pipeline task")
async def _replay_task(store: Store) -> Given:
    """A task whose definition gives it one attempt gets one more, not its pipeline
    job's three; claimed, it fails by its own policy (both through claimed_run)."""
    once = {"action": {"type": "handler", "name": "once"}, "retry": {"max_attempts": 1}}
    d = parse_definition({"tasks": {"once": once}})
    pipeline = Pipeline(new_id(), "default", "p", 1, d.to_dict(), d.fingerprint(), T0, T0, 1)
    await store.create_pipeline(pipeline, actor="alice")
    job = make_job(id=pipeline.id, retry=RETRY, next_fire_at=None)
    await store.create_jobs([job])
    start = PipelineRunStart.of(pipeline, job_id=job.id, job_version=1, actor="t", now=T0)
    await store.start_pipeline_run(start)
    claimed = await _claim(store)
    assert claimed.action == once["action"] and claimed.retry.max_attempts == 1
    assert claimed == _claimed_as_lifecycle_says(claimed.run, job)
    dead = (await _complete(store, claimed, Outcome(OutcomeKind.FAILED, "E", "e"))).after
    assert dead.state is RunState.DEAD
    given = await _replayed(store, dead, job)
    assert given.after.max_attempts == 2
    return given


# -- the walk ---------------------------------------------------------------------------


def _unchanged(run: Run) -> Transition:
    return Transition(
        state=run.state,
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        available_at=run.available_at,
        finished_at=run.finished_at,
        reason=run.reason,
        last_error=run.last_error,
    )


def _claimed_as_lifecycle_says(run: Run, job: Job) -> ClaimedRun:
    return lifecycle.claimed_run(
        run,
        job_name=job.name,
        action=job.action,
        payload=job.payload,
        retry=job.retry,
        timeout_seconds=job.timeout_seconds,
        delivery=job.delivery,
        traceparent=job.traceparent,
    )


def _at(seconds: float) -> dict[str, Any]:
    return {"limit": 5, "now": at(seconds), "prefetch_until": at(seconds), "lease_seconds": TTL}


class TransitionsContract:
    """Every run transition a store makes is the one :mod:`cronwheel.core.lifecycle`
    decides (decision 0040).

    Part of the ``queue`` seam's contract: subclass it with a ``store`` fixture to run
    it against a store (:mod:`cronwheel.store.conformance`)."""

    def test_every_state_event_pair_has_a_case(self) -> None:
        assert {(state, event) for state, event, _ in CASES.values()} == set(STATE_EVENTS)

    @pytest.mark.parametrize("name", list(CASES))
    async def test_the_store_makes_the_lifecycle_transition(self, store: Store, name: str) -> None:
        state, event, walk = CASES[name]
        given = await walk(store)
        before, after, expected = given.before, given.after, given.expected
        assert before.state is state
        assert after.state in STATE_EVENTS[(state, event)]
        seen = (
            after.state,
            after.attempt,
            after.max_attempts,
            after.available_at,
            after.finished_at,
            after.reason,
            after.last_error,
        )
        assert seen == (
            expected.state,
            expected.attempt,
            expected.max_attempts,
            expected.available_at,
            expected.finished_at,
            expected.reason,
            expected.last_error,
        )
        if after.state is not RunState.RUNNING:
            assert (after.lease_owner, after.lease_expires_at) == (None, None)
            assert not after.cancel_requested
        attempts = await store.list_attempts("default", after.id)
        if given.recorded is not None:
            last = attempts[-1]
            assert (last.attempt, last.outcome.value, last.error_class) == (
                before.attempt,
                *given.recorded,
            )
            assert last.error_message == after.last_error
        if expected.unclaim:
            assert len(attempts) == after.attempt  # nothing recorded for the undone claim
