"""The run's state machine: every verdict on a run's next state is made here, once.

What a claimed run executes with (:func:`claimed_run`), what a completion stores
(:func:`completion_for`), what a lost lease (:func:`rescue`), a stopping worker's release
(:func:`release`), a cancel (:func:`cancel`) and a replay (:func:`replay`) make of a run,
and how many attempts a run may have (:func:`attempt_budget`, :func:`replay_budget`).
The functions are pure: the stores and the HTTP worker path call them, and where the
PostgreSQL store keeps set-based SQL for a batched path, tests/store/test_transitions.py
holds its answers to theirs (decision 0040). See docs/lifecycle.md for every transition
and who makes it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from cronwheel.core.model import (
    JSON,
    REASON_AT_MOST_ONCE,
    REASON_AT_MOST_ONCE_LOST,
    REASON_AT_MOST_ONCE_STOPPED,
    REASON_BUDGET,
    REASON_EXHAUSTED,
    REASON_LEASE_LOST_LAST,
    REASON_PERMANENT,
    REASON_TIMED_OUT,
    AttemptOutcome,
    Backoff,
    ClaimedRun,
    Delivery,
    NotifyEvent,
    RetryPolicy,
    Run,
    RunState,
    hot_record,
)
from cronwheel.core.records import Completion


class OutcomeKind(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    """A retryable failure: an exception, a 5xx, a timeout of the target."""
    PERMANENT = "permanent"
    """A failure that retrying cannot fix: PermanentError, a 4xx."""
    TIMED_OUT = "timed_out"
    """The run outlived its ``timeout_seconds`` and was stopped."""
    CANCELLED = "cancelled"


@hot_record  # one per run: a frozen dataclass's __init__ costs a microsecond more
class Outcome:
    kind: OutcomeKind
    error_class: str | None = None
    error_message: str | None = None
    retry_after: float | None = None
    """The target's own wish (HTTP Retry-After): the retry waits at least this long, up to
    the retry policy's ``max_delay`` (a target cannot park a run for years)."""
    http_status: int | None = None
    """The status a webhook target answered, recorded with the attempt."""
    result: str | None = None
    """What a successful handler returned, as JSON text; None: nothing."""
    output: str | None = None
    """A command's exit and the tails of its output, as JSON text, recorded with the
    attempt (cronwheel.actions.command); None for other actions."""


SUCCEEDED: Final = Outcome(OutcomeKind.SUCCEEDED)
"""A success with nothing to record beyond it: most runs' outcome, made once."""

_ATTEMPT_OUTCOME = {
    OutcomeKind.SUCCEEDED: AttemptOutcome.SUCCEEDED,
    OutcomeKind.FAILED: AttemptOutcome.FAILED,
    OutcomeKind.PERMANENT: AttemptOutcome.PERMANENT,
    OutcomeKind.TIMED_OUT: AttemptOutcome.TIMED_OUT,
    OutcomeKind.CANCELLED: AttemptOutcome.CANCELLED,
}


def claimed_run(
    run: Run,
    *,
    job_name: str,
    action: Mapping[str, JSON],
    payload: JSON,
    retry: RetryPolicy,
    timeout_seconds: float,
    delivery: Delivery,
    traceparent: str | None = None,
) -> ClaimedRun:
    """What a claimed ``run`` executes with, from its job's own action, payload and
    policies: a pipeline task's own action, retry policy and timeout (its ``task_spec``)
    stand in for its job's, and an enqueued run's own payload for its job's. Every path
    that hands a run to a worker builds it here (both stores' claims and the HTTP
    completion), so a task fails by its own policy whoever executes it."""
    spec = run.task_spec
    if spec is not None:
        action = spec.get("action") or action
        retry = task_retry(spec) or retry
        own_timeout = spec.get("timeout_seconds")
        if own_timeout is not None:
            timeout_seconds = float(own_timeout)
    return ClaimedRun(
        run,
        job_name,
        action,
        payload if run.payload is None else run.payload,
        retry,
        timeout_seconds,
        delivery,
        traceparent,
    )


def task_retry(task_spec: Mapping[str, JSON]) -> RetryPolicy | None:
    """A pipeline task run's own retry policy; None if its spec has none."""
    own = task_spec.get("retry")
    return None if own is None else RetryPolicy.from_dict(own)


def attempt_budget(retry: RetryPolicy, delivery: Delivery = Delivery.AT_LEAST_ONCE) -> int:
    """How many attempts a run of these policies gets: at-most-once runs get one (a lost
    or failed run is never tried again), any other at least one."""
    return 1 if delivery is Delivery.AT_MOST_ONCE else max(retry.max_attempts, 1)


def replay_budget(run: Run, job_retry: RetryPolicy, job_delivery: Delivery) -> int:
    """The fresh attempts a replay of dead ``run`` gets: its own budget, as it had when
    it was created. A pipeline task's is its task's retry policy (as ``task_runs`` sets
    it), not its pipeline job's."""
    if run.task_spec is not None:
        own = task_retry(run.task_spec)
        if own is not None:
            return attempt_budget(own)
    return attempt_budget(job_retry, job_delivery)


def retry_delay(policy: RetryPolicy, attempt: int, rng: random.Random) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based).

    ``exponential_jitter`` is "full jitter": uniform between 0 and the exponential delay,
    which spreads a burst of failures best.
    """
    if policy.backoff is Backoff.FIXED:
        return min(policy.initial_delay, policy.max_delay)
    ceiling = min(policy.max_delay, policy.initial_delay * 2.0 ** min(attempt - 1, 62))
    if policy.backoff is Backoff.EXPONENTIAL:
        return ceiling
    return rng.uniform(0.0, ceiling)


def completion_for(
    claimed: ClaimedRun,
    outcome: Outcome,
    *,
    worker_id: str,
    started_at: datetime,
    finished_at: datetime,
    rng: random.Random,
) -> Completion:
    """The one store write that records ``outcome`` for a claimed run."""
    run = claimed.run
    state, available_at, reason = _next_state(claimed, outcome, finished_at, rng)
    return Completion(
        run_id=run.id,
        fence=run.fence,
        worker_id=worker_id,
        state=state,
        outcome=_ATTEMPT_OUTCOME[outcome.kind],
        started_at=started_at,
        finished_at=finished_at,
        lag_seconds=(started_at - run.available_at).total_seconds(),
        error_class=outcome.error_class,
        error_message=outcome.error_message,
        available_at=available_at,
        reason=reason,
        http_status=outcome.http_status,
        output=outcome.output,
        result=outcome.result if state is RunState.SUCCEEDED else None,
        pipeline_run_id=run.pipeline_run_id,
    )


def _next_state(
    claimed: ClaimedRun, outcome: Outcome, now: datetime, rng: random.Random
) -> tuple[RunState, datetime | None, str | None]:
    """The run's next state, when it is due again (a retry), and why it is dead."""
    if outcome.kind is OutcomeKind.SUCCEEDED:
        return RunState.SUCCEEDED, None, None
    if outcome.kind is OutcomeKind.CANCELLED:
        return RunState.CANCELLED, None, None
    run, policy = claimed.run, claimed.retry
    if outcome.kind is OutcomeKind.PERMANENT:
        return RunState.DEAD, None, REASON_PERMANENT
    if run.attempt >= run.max_attempts:
        return RunState.DEAD, None, _last_attempt_reason(claimed, outcome)
    wish = min(_finite(outcome.retry_after), policy.max_delay)
    delay = max(retry_delay(policy, run.attempt, rng), wish)
    retry_at = later(now, delay)
    budget = policy.budget_seconds
    if budget is not None and retry_at > later(run.scheduled_for, budget):
        return RunState.DEAD, None, REASON_BUDGET
    return RunState.PENDING, retry_at, None


def _finite(seconds: float | None) -> float:
    """A delay wish as a number we can add: none, negative or NaN is no wish."""
    if seconds is None or not seconds > 0:
        return 0.0
    return seconds


_LATEST = datetime.max.replace(tzinfo=UTC)


def later(moment: datetime, seconds: float) -> datetime:
    """``moment + seconds``, saturating at the last instant a datetime can hold instead
    of raising: every bound on the numbers a user gives is checked at the API, but a
    stored job or a remote worker's answer must never make the completion of a run
    raise (a run whose completion raises would stay held by its worker)."""
    try:
        return moment + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        return _LATEST if seconds > 0 else moment


def fallback_completion(
    claimed: ClaimedRun,
    outcome: Outcome,
    error: BaseException,
    *,
    worker_id: str,
    started_at: datetime,
    finished_at: datetime,
) -> Completion:
    """The completion of a run whose next state could not be computed (a defect of
    ours): the attempt is recorded as it ended, and the run goes to the dead letter
    with the reason, where a user sees it and can replay it. Nothing here can raise."""
    run = claimed.run
    reason = f"cronwheel could not decide what follows this attempt: {type(error).__name__}"
    return Completion(
        run_id=run.id,
        fence=run.fence,
        worker_id=worker_id,
        state=RunState.DEAD,
        outcome=_ATTEMPT_OUTCOME.get(outcome.kind, AttemptOutcome.FAILED),
        started_at=started_at,
        finished_at=finished_at,
        error_class=outcome.error_class or type(error).__name__,
        error_message=outcome.error_message or str(error)[:500],
        available_at=None,
        reason=reason,
        http_status=outcome.http_status,
        output=outcome.output,
    )


def _last_attempt_reason(claimed: ClaimedRun, outcome: Outcome) -> str:
    run = claimed.run
    if claimed.delivery is Delivery.AT_MOST_ONCE:
        return REASON_AT_MOST_ONCE
    template = REASON_TIMED_OUT if outcome.kind is OutcomeKind.TIMED_OUT else REASON_EXHAUSTED
    return template.format(attempt=run.attempt, max_attempts=run.max_attempts)


MAX_RESULT_BYTES = 256 * 1024
"""The largest result a handler may return, as JSON: the same limit as a payload's."""


def result_outcome(value: object, *, task: bool) -> Outcome:
    """A successful handler's return value, stored with its run (a pipeline task's
    children get it as ``ctx.inputs``) when it is JSON of at most 256 KiB. A pipeline
    task that returns anything else fails for good, saying why (retrying would return
    the same, and its children could not get it); any other run succeeds without a
    stored result, as before results were stored."""
    problem = None
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        problem = ("ResultNotJSON", f"the handler returned a value that is not JSON: {exc}")
    else:
        size = len(text.encode())
        if size > MAX_RESULT_BYTES:
            problem = (
                "ResultTooLarge",
                f"the handler returned {size} bytes of JSON; the limit is {MAX_RESULT_BYTES}"
                " (256 KiB): store large data elsewhere and return a reference to it",
            )
    if problem is None:
        return Outcome(OutcomeKind.SUCCEEDED, result=text)
    if task:
        return Outcome(OutcomeKind.PERMANENT, *problem)
    return Outcome(OutcomeKind.SUCCEEDED)


# -- the state machine ------------------------------------------------------------------


class Event(StrEnum):
    """What can happen to a run: the columns of :data:`STATE_EVENTS`."""

    CLAIM = "claim"
    """A worker leases a due pending run (claimed ahead: not started yet)."""
    START = "start"
    """A run claimed ahead begins: its start is recorded, its state stays."""
    SUCCEED = "succeed"
    FAIL = "fail"
    """A completion with a failure: retryable, permanent, or a timeout."""
    STOP = "stop"
    """A completion of a run its worker stopped because a cancel was asked for."""
    LEASE_EXPIRED = "lease_expired"
    """Its worker did not report before the lease ran out, or was proved dead."""
    RELEASE = "release"
    """A stopping worker gives the run back without an outcome."""
    CANCEL = "cancel"
    """Someone cancels it (``POST /v1/runs/{id}/cancel``)."""
    REPLAY = "replay"
    """Someone replays it from the dead letter."""
    SKIP = "skip"
    """Its overlap or misfire policy says it is not to run."""


STATE_EVENTS: Mapping[tuple[RunState, Event], frozenset[RunState]] = {
    (RunState.PENDING, Event.CLAIM): frozenset({RunState.RUNNING}),
    (RunState.PENDING, Event.SKIP): frozenset({RunState.SKIPPED}),
    (RunState.PENDING, Event.CANCEL): frozenset({RunState.CANCELLED}),
    (RunState.RUNNING, Event.START): frozenset({RunState.RUNNING}),
    (RunState.RUNNING, Event.SUCCEED): frozenset({RunState.SUCCEEDED}),
    (RunState.RUNNING, Event.FAIL): frozenset({RunState.PENDING, RunState.DEAD}),
    (RunState.RUNNING, Event.STOP): frozenset({RunState.CANCELLED}),
    (RunState.RUNNING, Event.LEASE_EXPIRED): frozenset(
        {RunState.PENDING, RunState.DEAD, RunState.CANCELLED}
    ),
    (RunState.RUNNING, Event.RELEASE): frozenset(
        {RunState.PENDING, RunState.DEAD, RunState.CANCELLED}
    ),
    # A cancel asks a running run to stop: it ends by STOP, or LEASE_EXPIRED/RELEASE
    # (cancelled either way).
    (RunState.RUNNING, Event.CANCEL): frozenset({RunState.RUNNING}),
    (RunState.DEAD, Event.REPLAY): frozenset({RunState.PENDING}),
    # Cancelling is idempotent: a finished run stays as it is.
    **{
        (state, Event.CANCEL): frozenset({state})
        for state in (RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED, RunState.SKIPPED)
    },
}
"""Every allowed (state, event) pair and the states it may lead to; a pair not here is
no transition (the store refuses it or ignores it: a stale fence, a replay of a run that
is not dead). tests/store/test_transitions.py walks every pair on every store."""


@dataclass(frozen=True, slots=True)
class Transition:
    """A run's next state and the columns that go with it, as the run reads after it; its
    lease, owner and cancel flag are always cleared."""

    state: RunState
    attempt: int
    max_attempts: int
    available_at: datetime
    finished_at: datetime | None
    reason: str | None
    last_error: str | None
    unclaim: bool = False
    """The claim is undone but for its fence (fences only grow): the attempt number
    goes back (``attempt`` says to what), the run's start is its previous attempt's
    again (the store reads it from history), and no attempt is recorded."""
    recorded: AttemptOutcome | None = None
    """The outcome of the attempt row written with it; None: no attempt row."""
    error_class: str | None = None
    """The recorded attempt's error class (its message is ``last_error``)."""
    event: NotifyEvent | None = None
    """The notification event of the change; None: none."""


def lease_expired_message(owner: str | None, expired_at: datetime | None) -> str:
    """The error of an attempt whose worker did not report before its lease expired."""
    expiry = None if expired_at is None else expired_at.isoformat()
    return f"worker {owner} did not report before its lease expired at {expiry}"


def worker_gone_message(owner: str | None) -> str:
    """The error of an attempt whose worker was proved dead before its lease expired."""
    return f"worker {owner} ended without reporting (its process died)"


UNSTARTED_LOST_NOTE = (
    "; its start was not stored, so it may not have begun: recorded, not counted against"
    " the retry budget"
)
"""Ends the error of a lost attempt of a run claimed ahead whose start was not stored."""


def rescue(run: Run, *, delivery: Delivery, now: datetime, gone: bool = False) -> Transition:
    """What a running ``run`` whose lease expired (or whose owner is ``gone``) becomes.

    Started: a ``lost`` attempt, then cancelled if that was asked for, dead if it was
    at-most-once (it may have begun: never again) or on its last attempt, else due
    again now.

    Not started (claimed ahead, its start not stored): an at-most-once run's start is
    stored *before* it begins, so it never began: unclaimed, charged nothing, recorded
    nowhere, pending again or cancelled. Any other run's start is stored *beside* its
    action, so it may have begun (a worker whose loop or store lagged past the lease
    still runs it): its attempt is never made again under the same number. A ``lost``
    attempt is recorded (no start: none was stored), not charged (its budget grows by
    one, as a release after the start gives it back), and the run is pending again, due
    when it was, or cancelled; no event, as no attempt of its budget failed.
    """
    unstarted = run.started_at is None
    if unstarted and delivery is Delivery.AT_MOST_ONCE:
        return _unclaimed(run, now)
    if gone:
        error_class, message = "WorkerGone", worker_gone_message(run.lease_owner)
    else:
        error_class = "LeaseExpired"
        message = lease_expired_message(run.lease_owner, run.lease_expires_at)
    if unstarted:
        return _lost_unstarted(run, now, error_class, message + UNSTARTED_LOST_NOTE)
    state, reason = RunState.PENDING, run.reason
    event: NotifyEvent | None = NotifyEvent.FAILED
    if run.cancel_requested:
        state, event = RunState.CANCELLED, None
    elif delivery is Delivery.AT_MOST_ONCE:
        state, reason, event = RunState.DEAD, REASON_AT_MOST_ONCE_LOST, NotifyEvent.DEAD
    elif run.attempt >= run.max_attempts:
        state, reason, event = RunState.DEAD, REASON_LEASE_LOST_LAST, NotifyEvent.DEAD
    return Transition(
        state=state,
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        available_at=now if state is RunState.PENDING else run.available_at,
        finished_at=now if state.finished else None,
        reason=reason,
        last_error=message,
        recorded=AttemptOutcome.LOST,
        error_class=error_class,
        event=event,
    )


def _lost_unstarted(run: Run, now: datetime, error_class: str, message: str) -> Transition:
    """A lost claim that may have begun: recorded ``lost``, its budget given back."""
    state = RunState.CANCELLED if run.cancel_requested else RunState.PENDING
    pending = state is RunState.PENDING
    return Transition(
        state=state,
        attempt=run.attempt,
        max_attempts=run.max_attempts + 1 if pending else run.max_attempts,
        available_at=run.available_at,
        finished_at=None if pending else now,
        reason=run.reason,
        last_error=message,
        recorded=AttemptOutcome.LOST,
        error_class=error_class,
    )


def release(run: Run, *, started: bool, why: str, delivery: Delivery, now: datetime) -> Transition:
    """What a running ``run`` a stopping worker gives back becomes (``started``: whether
    its action had begun, as the worker says).

    Not started: unclaimed, as a lost lease of a run that never began is. Started: a
    ``cancelled`` attempt (``WorkerShutdown``, ``why``), then cancelled if that was
    asked for, dead if at-most-once (never started twice), else pending again, due no
    earlier than now, with the attempt's budget given back (a stop is not the run's
    failure, and no claim may exceed ``max_attempts``).
    """
    if not started:
        return _unclaimed(run, now)
    state, reason, event, more = RunState.PENDING, run.reason, None, 1
    if run.cancel_requested:
        state, more = RunState.CANCELLED, 0
    elif delivery is Delivery.AT_MOST_ONCE:
        state, reason, event, more = RunState.DEAD, REASON_AT_MOST_ONCE_STOPPED, NotifyEvent.DEAD, 0
    return Transition(
        state=state,
        attempt=run.attempt,
        max_attempts=run.max_attempts + more,
        available_at=max(run.available_at, now) if more else run.available_at,
        finished_at=now if state.finished else None,
        reason=reason,
        last_error=why,
        recorded=AttemptOutcome.CANCELLED,
        error_class="WorkerShutdown",
        event=event,
    )


def _unclaimed(run: Run, now: datetime) -> Transition:
    """A claim undone: pending again with its due time and budget untouched, or
    cancelled if that was asked for meanwhile."""
    state = RunState.CANCELLED if run.cancel_requested else RunState.PENDING
    return Transition(
        state=state,
        attempt=run.attempt - 1,
        max_attempts=run.max_attempts,
        available_at=run.available_at,
        finished_at=now if state.finished else None,
        reason=run.reason,
        last_error=run.last_error,
        unclaim=True,
    )


class CancelVerdict(StrEnum):
    """What a cancel does to a run, by its state (see :func:`cancel`)."""

    CANCEL = "cancel"
    """Pending: cancelled at once, never started."""
    ASK = "ask"
    """Running: asked to stop; its worker sees it at its next heartbeat."""
    NOTHING = "nothing"
    """Finished, or running and already asked: left as it is (cancelling is idempotent)."""


def cancel(state: RunState, cancel_requested: bool) -> CancelVerdict:
    """What cancelling a run in ``state`` does; audited unless it does nothing."""
    if state is RunState.PENDING:
        return CancelVerdict.CANCEL
    if state is RunState.RUNNING and not cancel_requested:
        return CancelVerdict.ASK
    return CancelVerdict.NOTHING


def cancel_reason(actor: str) -> str:
    """The ``reason`` of a pending run cancelled by ``actor``."""
    return f"cancelled by {actor}"


def cancelled(run: Run, *, actor: str, now: datetime) -> Transition:
    """A pending ``run`` cancelled by ``actor`` (when :func:`cancel` says CANCEL)."""
    return Transition(
        state=RunState.CANCELLED,
        attempt=run.attempt,
        max_attempts=run.max_attempts,
        available_at=run.available_at,
        finished_at=now,
        reason=cancel_reason(actor),
        last_error=run.last_error,
    )


def replay_reason(actor: str) -> str:
    """The ``reason`` of a dead run replayed by ``actor``."""
    return f"replayed by {actor}"


def replay(run: Run, *, budget: int, actor: str, now: datetime) -> Transition | None:
    """A dead ``run`` back to pending, due now, with ``budget`` fresh attempts (see
    :func:`replay_budget`): the same run, so the same idempotency key. None if it is
    not dead: only a dead run is replayed."""
    if run.state is not RunState.DEAD:
        return None
    return Transition(
        state=RunState.PENDING,
        attempt=run.attempt,
        max_attempts=run.attempt + budget,
        available_at=now,
        finished_at=None,
        reason=replay_reason(actor),
        last_error=None,
    )
