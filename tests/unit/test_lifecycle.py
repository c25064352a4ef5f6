"""The outcome → completion mapping and the retry backoff."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.core import lifecycle
from cronwheel.core.lifecycle import (
    Outcome,
    OutcomeKind,
    completion_for,
    fallback_completion,
    later,
    retry_delay,
)
from cronwheel.core.model import (
    REASON_AT_MOST_ONCE,
    REASON_BUDGET,
    REASON_PERMANENT,
    AttemptOutcome,
    Backoff,
    ClaimedRun,
    Delivery,
    Priority,
    RetryPolicy,
    Run,
    RunState,
)
from cronwheel.store.conformance.factories import T0, at


def _claimed(attempt: int = 1, max_attempts: int = 3, **retry: object) -> ClaimedRun:
    run = Run(
        id=1,
        tenant_id="default",
        job_id="j",
        scheduled_for=T0,
        available_at=T0,
        state=RunState.RUNNING,
        pool="default",
        priority=Priority.NORMAL,
        attempt=attempt,
        max_attempts=max_attempts,
        fence=attempt,
        job_version=1,
        created_at=T0,
    )
    policy = replace(RetryPolicy(), **retry)  # type: ignore[arg-type]
    return ClaimedRun(run, "j", {}, None, policy, 30.0, Delivery.AT_LEAST_ONCE)


def _complete(
    claimed: ClaimedRun, outcome: Outcome, seed: int = 1
) -> tuple[RunState, float | None]:
    done = completion_for(
        claimed,
        outcome,
        worker_id="w",
        started_at=at(0.25),
        finished_at=at(10),
        rng=random.Random(seed),
    )
    wait = None if done.available_at is None else (done.available_at - at(10)).total_seconds()
    return done.state, wait


def test_fixed_and_exponential_delays() -> None:
    rng = random.Random(0)
    fixed = RetryPolicy(backoff=Backoff.FIXED, initial_delay=2, max_delay=60)
    assert [retry_delay(fixed, a, rng) for a in (1, 2, 5)] == [2, 2, 2]
    exp = RetryPolicy(backoff=Backoff.EXPONENTIAL, initial_delay=1, max_delay=10)
    assert [retry_delay(exp, a, rng) for a in (1, 2, 3, 4, 5, 100)] == [1, 2, 4, 8, 10, 10]


def test_full_jitter_stays_within_bounds_and_really_spreads() -> None:
    rng = random.Random(42)
    policy = RetryPolicy(backoff=Backoff.EXPONENTIAL_JITTER, initial_delay=1, max_delay=30)
    for attempt in (1, 3, 6, 20):
        delays = [retry_delay(policy, attempt, rng) for _ in range(2000)]
        ceiling = min(30.0, 2.0 ** (attempt - 1))
        assert all(0 <= d <= ceiling for d in delays)
        # spread over the whole window: every quarter of it gets a fair share
        quarters = [
            sum(q * ceiling / 4 <= d < (q + 1) * ceiling / 4 for d in delays) for q in range(4)
        ]
        assert min(quarters) > 350, quarters


def test_success_and_attempt_record() -> None:
    done = completion_for(
        _claimed(),
        Outcome(OutcomeKind.SUCCEEDED),
        worker_id="w",
        started_at=at(0.25),
        finished_at=at(1),
        rng=random.Random(0),
    )
    assert (done.state, done.outcome, done.lag_seconds, done.fence) == (
        RunState.SUCCEEDED,
        AttemptOutcome.SUCCEEDED,
        0.25,
        1,
    )


def test_failure_retries_with_backoff_until_the_budget_is_spent() -> None:
    policy = {"backoff": Backoff.EXPONENTIAL, "initial_delay": 3.0}
    assert _complete(_claimed(1, 3, **policy), Outcome(OutcomeKind.FAILED)) == (
        RunState.PENDING,
        3.0,
    )
    assert _complete(_claimed(2, 3, **policy), Outcome(OutcomeKind.TIMED_OUT)) == (
        RunState.PENDING,
        6.0,
    )
    assert _complete(_claimed(3, 3, **policy), Outcome(OutcomeKind.FAILED)) == (RunState.DEAD, None)


def test_permanent_errors_and_cancellation_skip_retries() -> None:
    assert _complete(_claimed(), Outcome(OutcomeKind.PERMANENT, "PermanentError")) == (
        RunState.DEAD,
        None,
    )
    assert _complete(_claimed(), Outcome(OutcomeKind.CANCELLED)) == (RunState.CANCELLED, None)


def test_retry_after_is_honoured() -> None:
    claimed = _claimed(backoff=Backoff.FIXED, initial_delay=1.0)
    assert _complete(claimed, Outcome(OutcomeKind.FAILED, retry_after=42.0)) == (
        RunState.PENDING,
        42.0,
    )


@pytest.mark.parametrize(("budget", "expected"), [(12.0, RunState.DEAD), (14.0, RunState.PENDING)])
def test_time_budget_counts_from_the_scheduled_instant(budget: float, expected: RunState) -> None:
    # failed at T0+10s, next try would be at T0+13s
    claimed = _claimed(backoff=Backoff.FIXED, initial_delay=3.0, budget_seconds=budget)
    assert _complete(claimed, Outcome(OutcomeKind.FAILED))[0] is expected


def test_lag_is_measured_from_when_the_run_was_due() -> None:
    claimed = _claimed()
    later = replace(claimed, run=replace(claimed.run, available_at=T0 - timedelta(seconds=1)))
    done = completion_for(
        later,
        Outcome(OutcomeKind.SUCCEEDED),
        worker_id="w",
        started_at=T0,
        finished_at=at(1),
        rng=random.Random(0),
    )
    assert done.lag_seconds == 1.0


def _why(claimed: ClaimedRun, outcome: Outcome) -> tuple[RunState, AttemptOutcome, str | None]:
    done = completion_for(
        claimed, outcome, worker_id="w", started_at=at(0), finished_at=at(10), rng=random.Random(1)
    )
    return done.state, done.outcome, done.reason


def test_every_dead_completion_says_why() -> None:
    failed, timed_out = Outcome(OutcomeKind.FAILED, "E"), Outcome(OutcomeKind.TIMED_OUT, "T")
    assert _why(_claimed(3, 3), failed) == (
        RunState.DEAD,
        AttemptOutcome.FAILED,
        "attempts exhausted: attempt 3 of 3 failed",
    )
    assert _why(_claimed(2, 2), timed_out) == (
        RunState.DEAD,
        AttemptOutcome.TIMED_OUT,
        "timed out on its last attempt (2 of 2)",
    )
    assert _why(_claimed(1, 3), Outcome(OutcomeKind.PERMANENT, "HTTP404")) == (
        RunState.DEAD,
        AttemptOutcome.PERMANENT,
        REASON_PERMANENT,
    )
    spent = _claimed(1, 3, backoff=Backoff.FIXED, initial_delay=3.0, budget_seconds=5.0)
    assert _why(spent, failed) == (RunState.DEAD, AttemptOutcome.FAILED, REASON_BUDGET)
    once = replace(_claimed(1, 1), delivery=Delivery.AT_MOST_ONCE)
    assert _why(once, failed) == (RunState.DEAD, AttemptOutcome.FAILED, REASON_AT_MOST_ONCE)


def test_a_retry_or_a_success_leaves_the_reason_alone() -> None:
    assert _why(_claimed(1, 3), Outcome(OutcomeKind.FAILED))[2] is None
    assert _why(_claimed(3, 3), Outcome(OutcomeKind.SUCCEEDED))[2] is None
    assert _why(_claimed(3, 3), Outcome(OutcomeKind.CANCELLED))[2] is None


@pytest.mark.parametrize("wish", [999_999_999_999.0, float("inf"), 1e300])
def test_a_retry_after_wish_is_capped_by_max_delay(wish: float) -> None:
    # Issue 17, defect 1: a huge Retry-After overflowed past year 9999 and jammed the run.
    claimed = _claimed(max_delay=120.0, initial_delay=1.0, backoff=Backoff.FIXED)
    failed = Outcome(OutcomeKind.FAILED, "HTTP503", "busy", retry_after=wish)
    assert _complete(claimed, failed) == (RunState.PENDING, 120.0)


@pytest.mark.parametrize("wish", [float("nan"), -5.0, None])
def test_a_retry_after_that_is_no_number_is_no_wish(wish: float | None) -> None:
    claimed = _claimed(max_delay=120.0, initial_delay=2.0, backoff=Backoff.FIXED)
    failed = Outcome(OutcomeKind.FAILED, "HTTP503", "busy", retry_after=wish)
    assert _complete(claimed, failed) == (RunState.PENDING, 2.0)


def test_a_budget_beyond_the_calendar_never_raises() -> None:
    # A job stored before budgets were bounded: 1e300 s is "no budget", not an overflow.
    claimed = _claimed(budget_seconds=1e300, initial_delay=1.0, backoff=Backoff.FIXED)
    failed = Outcome(OutcomeKind.FAILED, "E", "x")
    assert _complete(claimed, failed) == (RunState.PENDING, 1.0)
    late = replace(
        claimed, run=replace(claimed.run, scheduled_for=datetime.max.replace(tzinfo=UTC))
    )
    assert (
        completion_for(
            late, failed, worker_id="w", started_at=at(0), finished_at=at(1), rng=random.Random(1)
        ).state
        is RunState.PENDING
    )


def test_later_saturates_instead_of_raising() -> None:
    latest = datetime.max.replace(tzinfo=UTC)
    assert later(at(0), 1e300) == latest
    assert later(latest, 1.0) == latest
    assert later(at(0), 1.5) == at(1.5)


def test_the_fallback_completion_records_the_attempt_and_parks_the_run() -> None:
    failed = Outcome(OutcomeKind.FAILED, "HTTP500", "boom", http_status=500)
    done = fallback_completion(
        _claimed(), failed, ArithmeticError("x"), worker_id="w", started_at=at(0), finished_at=at(1)
    )
    assert (done.state, done.outcome, done.error_class, done.http_status) == (
        RunState.DEAD,
        AttemptOutcome.FAILED,
        "HTTP500",
        500,
    )
    assert done.reason is not None and "ArithmeticError" in done.reason


# -- the state machine (decision 0040) ------------------------------------------------

HOURLY = RetryPolicy(max_attempts=1, backoff=Backoff.FIXED, initial_delay=3600, max_delay=7200)
TASK_SPEC = {
    "action": {"type": "handler", "name": "task"},
    "retry": HOURLY.to_dict(),
    "timeout_seconds": 12.0,
}


def _claimed_as(run: Run) -> ClaimedRun:
    return lifecycle.claimed_run(
        run,
        job_name="pipeline:p",
        action={"type": "pipeline", "pipeline_id": "p"},
        payload={"job": 1},
        retry=RetryPolicy(),
        timeout_seconds=300.0,
        delivery=Delivery.AT_LEAST_ONCE,
        traceparent="00-tp",
    )


def test_a_task_runs_with_its_own_action_retry_and_timeout() -> None:
    run = replace(_claimed().run, task_spec=TASK_SPEC, payload={"item": 2})
    claimed = _claimed_as(run)
    assert claimed.action == TASK_SPEC["action"] and claimed.retry == HOURLY
    assert (claimed.timeout_seconds, claimed.payload) == (12.0, {"item": 2})
    assert (claimed.job_name, claimed.traceparent) == ("pipeline:p", "00-tp")
    plain = _claimed_as(_claimed().run)
    assert plain.action["type"] == "pipeline" and plain.retry == RetryPolicy()
    assert (plain.timeout_seconds, plain.payload) == (300.0, {"job": 1})


def test_a_task_fails_by_its_own_retry_policy() -> None:
    run = replace(
        _claimed().run, task_spec={**TASK_SPEC, "retry": {**HOURLY.to_dict(), "max_attempts": 3}}
    )
    state, wait = _complete(_claimed_as(run), Outcome(OutcomeKind.FAILED))
    assert (state, wait) == (RunState.PENDING, 3600)


def test_budgets() -> None:
    assert lifecycle.attempt_budget(RetryPolicy(max_attempts=5)) == 5
    assert lifecycle.attempt_budget(RetryPolicy(max_attempts=5), Delivery.AT_MOST_ONCE) == 1
    assert lifecycle.attempt_budget(RetryPolicy(max_attempts=0)) == 1
    dead = replace(_claimed().run, state=RunState.DEAD, attempt=3)
    assert lifecycle.replay_budget(dead, RetryPolicy(), Delivery.AT_LEAST_ONCE) == 3
    task = replace(dead, task_spec=TASK_SPEC)
    assert lifecycle.replay_budget(task, RetryPolicy(), Delivery.AT_LEAST_ONCE) == 1
    replayed = lifecycle.replay(task, budget=1, actor="alice", now=at(5))
    assert replayed is not None
    assert (replayed.state, replayed.max_attempts, replayed.reason) == (
        RunState.PENDING,
        4,
        "replayed by alice",
    )
    assert lifecycle.replay(_claimed().run, budget=1, actor="alice", now=at(5)) is None


def test_every_verdict_is_an_allowed_transition() -> None:
    """rescue, release and cancel answer only with states STATE_EVENTS allows."""
    events = lifecycle.STATE_EVENTS
    for started in (None, at(0)):
        for cancel_requested in (False, True):
            for attempt in (1, 3):
                for delivery in Delivery:
                    run = replace(
                        _claimed(attempt=attempt).run,
                        started_at=started,
                        cancel_requested=cancel_requested,
                    )
                    lost = lifecycle.rescue(run, delivery=delivery, now=at(40))
                    assert lost.state in events[(RunState.RUNNING, lifecycle.Event.LEASE_EXPIRED)]
                    # Only a run that cannot have begun is unclaimed (an at-most-once
                    # run's start is stored before it begins); any other keeps its
                    # attempt number, recorded, so that it is never made twice.
                    unclaim = started is None and delivery is Delivery.AT_MOST_ONCE
                    assert lost.unclaim is unclaim
                    assert (lost.recorded is None) is unclaim
                    assert lost.attempt == run.attempt - unclaim
                    # Charged only when made: a lost attempt without a stored start
                    # gives its budget back (when the run is to be tried again).
                    uncharged = started is None and lost.state is RunState.PENDING
                    assert lost.max_attempts == run.max_attempts + (uncharged and not unclaim)
                    given = lifecycle.release(
                        run, started=started is not None, why="stop", delivery=delivery, now=at(5)
                    )
                    assert given.state in events[(RunState.RUNNING, lifecycle.Event.RELEASE)]
                    assert (given.state is RunState.CANCELLED) is cancel_requested
    for state in RunState:
        verdict = lifecycle.cancel(state, False)
        after = RunState.CANCELLED if verdict is lifecycle.CancelVerdict.CANCEL else state
        assert events[(state, lifecycle.Event.CANCEL)] == {after}
