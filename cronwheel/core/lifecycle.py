"""What happened → what to store: the one mapping from an execution's outcome to the
run's next state, and the retry backoff.

The worker turns a handler's return, exception or timeout into an :class:`Outcome`;
:func:`completion_for` turns that into exactly one :class:`~cronwheel.store.base.Completion`.
See docs/lifecycle.md for every transition and who makes it.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from cronwheel.core.model import (
    REASON_AT_MOST_ONCE,
    REASON_BUDGET,
    REASON_EXHAUSTED,
    REASON_PERMANENT,
    REASON_TIMED_OUT,
    AttemptOutcome,
    Backoff,
    ClaimedRun,
    Delivery,
    RetryPolicy,
    RunState,
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


@dataclass(frozen=True, slots=True)
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


_ATTEMPT_OUTCOME = {
    OutcomeKind.SUCCEEDED: AttemptOutcome.SUCCEEDED,
    OutcomeKind.FAILED: AttemptOutcome.FAILED,
    OutcomeKind.PERMANENT: AttemptOutcome.PERMANENT,
    OutcomeKind.TIMED_OUT: AttemptOutcome.TIMED_OUT,
    OutcomeKind.CANCELLED: AttemptOutcome.CANCELLED,
}


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
