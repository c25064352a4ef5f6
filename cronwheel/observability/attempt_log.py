"""The worker's one line per attempt: job, run, attempt, outcome, duration, start lag,
and for a failure its error (a traceback for a handler's unexpected exception).

Levels: a success or a cancellation is info; a failure that will be retried, warning; a
failure that leaves the run dead (a permanent error, the last attempt), error. Nothing is
formatted when the level filters the line out: a worker at ``--log-level warning`` spends
one ``isEnabledFor`` per successful run.
"""

from __future__ import annotations

import logging
from typing import Final

from cronwheel.core.model import AttemptOutcome, ClaimedRun, RunState
from cronwheel.core.records import Completion

ATTEMPTS_LOGGER: Final = "cronwheel.attempts"
"""The attempt-end lines' logger, apart from the worker's other lines so that it can be
set on its own (``cronwheel dev`` keeps it quiet by default: its console shows runs)."""

_log: Final = logging.getLogger(ATTEMPTS_LOGGER)

_QUIET: Final = frozenset({AttemptOutcome.SUCCEEDED, AttemptOutcome.CANCELLED})


def level_of(done: Completion) -> int:
    """The level of an attempt's end line."""
    if done.outcome in _QUIET:
        return logging.INFO
    return logging.ERROR if done.state is RunState.DEAD else logging.WARNING


def log_attempt_end(
    claimed: ClaimedRun,
    done: Completion,
    error: BaseException | None = None,
) -> None:
    """Log the end of the attempt ``done`` records; ``error``: the handler's unexpected
    exception, whose traceback goes with the line."""
    level = level_of(done)
    if not _log.isEnabledFor(level):
        return
    run = claimed.run
    started = done.started_at or done.finished_at
    duration = (done.finished_at - started).total_seconds()
    lag = done.lag_seconds or 0.0
    fields: dict[str, object] = {
        "job_name": claimed.job_name,
        "outcome": done.outcome.value,
        "state": done.state.value,
        "scheduled_for": run.scheduled_for,
        "duration_seconds": round(duration, 6),
        "lag_seconds": round(lag, 6),
        "max_attempts": run.max_attempts,
    }
    text = (
        f"run {run.id} of job {claimed.job_name} ({run.job_id}) attempt"
        f" {run.attempt}/{run.max_attempts} {done.outcome.value} in {duration:.3f} s,"
        f" start lag {lag:.3f} s"
    )
    if done.error_class is not None or done.error_message is not None:
        fields["error_class"] = done.error_class
        fields["error"] = done.error_message
        text += f": {done.error_class}: {done.error_message}"
    if done.state is RunState.PENDING and done.available_at is not None:
        fields["retry_at"] = done.available_at
        text += f"; retry at {done.available_at.isoformat()}"
    elif done.state is RunState.DEAD:
        fields["reason"] = done.reason
        text += f"; dead: {done.reason}"
    # A timeout's or a cancellation's exception is the stop we caused: no traceback.
    failed = error is not None and done.outcome is AttemptOutcome.FAILED
    exc_info = (type(error), error, error.__traceback__) if failed and error else None
    # Made and handled here, not by _log.log(): that looks up the caller's file and line
    # by walking the stack (a sixth of a line's cost), and the caller is always this.
    record = _log.makeRecord(
        _log.name, level, __file__, 0, "%s", (text,), exc_info, "log_attempt_end", fields
    )
    _log.handle(record)
