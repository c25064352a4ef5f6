"""How the console writes an event: one line, at the event's own time (UTC).

A line never holds a line break (an error message's are shown as ``⏎``), so a log file
or a pipe gets exactly one line per event, which ``grep`` and ``tail -f`` can follow.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from cronwheel.console.events import Event, Kind, next_step
from cronwheel.core.model import AttemptOutcome, Run, RunState
from cronwheel.core.text import escape_controls

STYLE = {
    "succeeded": "green",
    "dead": "bold red",
    "failed": "red",
    "failed permanently": "red",
    "timed out": "red",
    "lost": "red",
    "started": "yellow",
    "running": "yellow",
    "claimed": "cyan",
    "pending": "cyan",
    "cancelled": "magenta",
    "skipped": "dim",
    "waits": "bold yellow",
}

_OUTCOME = {
    AttemptOutcome.SUCCEEDED: "succeeded",
    AttemptOutcome.FAILED: "failed",
    AttemptOutcome.PERMANENT: "failed permanently",
    AttemptOutcome.TIMED_OUT: "timed out",
    AttemptOutcome.CANCELLED: "cancelled",
    AttemptOutcome.LOST: "lost",
}


def one_line(text: str) -> str:
    """``text`` on one line: its line breaks shown as ``⏎``, and every other control
    character, bidi control and line separator escaped as the CLI and the text log
    escape them (:func:`cronwheel.core.text.escape_controls`)."""
    return escape_controls(text.replace("\r\n", "\n").replace("\n", "⏎"))


def stamp(at: datetime, *, with_date: bool = False) -> str:
    """``12:00:05.123`` (UTC); with the date for history, which may be days old."""
    text = at.strftime("%Y-%m-%d %H:%M:%S.%f" if with_date else "%H:%M:%S.%f")
    return text[:-3]


def duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min"


def describe(event: Event, *, own_worker: str | None = None) -> tuple[str, str]:
    """The event without its time, and the word that gives its colour."""
    run = event.run
    if event.kind is Kind.WAITS:
        served = ", ".join(event.served) or "none"
        text = (
            f"job {event.job} waits: no worker serves pool {event.pool!r}"
            f" (this dev process serves: {served})"
        )
        return text, "waits"
    head = f"run {run.id if run else '?'} {event.job}"
    if event.kind is Kind.CLOSED and run is not None:
        reason = f": {run.reason}" if run.reason else ""
        if event.count > 1:
            many = f"{event.count} or more" if event.more else str(event.count)
            head = f"{many} runs of {event.job} from run {run.id}"
        return f"{head} {run.state.value}{reason}", run.state.value
    number = f"attempt {event.attempt_number}/{run.max_attempts if run else '?'}"
    elsewhere = f" on {event.worker}" if event.worker and event.worker != own_worker else ""
    if event.kind is Kind.STARTED:
        return f"{head} {number} started{elsewhere}", "started"
    if event.kind is Kind.RUNNING:
        return f"{head} {number} running{elsewhere} (started before this start)", "running"
    attempt = event.attempt
    assert attempt is not None
    outcome = _OUTCOME[attempt.outcome]
    took = ""
    if attempt.started_at is not None and attempt.outcome is not AttemptOutcome.LOST:
        took = f" in {duration((attempt.finished_at - attempt.started_at).total_seconds())}"
    error = ""
    if attempt.error_class or attempt.error_message:
        parts = [p for p in (attempt.error_class, attempt.error_message) if p]
        error = ": " + ": ".join(parts)
    error += _last_output(attempt.output) if not error else ""
    then = _then(attempt.outcome, next_step(attempt, run), run)
    style = outcome if then not in ("dead", "cancelled") else then
    arrow = _arrow(then, run, attempt.attempt)
    return f"{head} {number} {outcome}{elsewhere}{took}{error}{arrow}", style


SHOWN_OUTPUT = 120
"""Characters of a command's last line of output a console line shows."""


def _last_output(output: str | None) -> str:
    """A command's last line of output (stdout's, else stderr's): what a succeeded
    attempt's line says of it (a failed one's error ends with its stderr already)."""
    if output is None:
        return ""
    try:
        found = json.loads(output)
        streams = [str(found.get(k) or "") for k in ("stdout", "stderr")]
    except (ValueError, TypeError, AttributeError):
        return ""
    for stream in streams:
        lines = stream.rstrip("\n").splitlines()
        if lines and lines[-1].strip():
            return f" — {escape_controls(lines[-1].strip()[:SHOWN_OUTPUT])}"
    return ""


def _then(outcome: AttemptOutcome, step: str | None, run: Run | None) -> str | None:
    if step == RunState.SUCCEEDED.value and outcome is AttemptOutcome.SUCCEEDED:
        return None  # the outcome says it all
    return step


def _arrow(step: str | None, run: Run | None, attempt_number: int) -> str:
    if step is None or run is None:
        return ""
    if step == "retry":
        return f" → retry at {stamp(run.available_at)}"
    if step == "retried":
        # The retry was claimed already (a worker claims runs due within its prefetch
        # window): its planned start is the retry's instant.
        if run.attempt == attempt_number + 1:
            # Claimed ahead and not started yet: its instant is the planned start.
            return f" → retry at {stamp(run.started_at or run.available_at)}"
        return " → retried"
    reason = f" ({run.reason})" if run.reason and step != "succeeded" else ""
    return f" → run {step}{reason}"


def render(
    event: Event, *, own_worker: str | None = None, history: bool = False
) -> tuple[str, str]:
    """The event's whole line (history lines carry their date and say they are history),
    and the word that gives its colour."""
    text, style = describe(event, own_worker=own_worker)
    when = stamp(event.at, with_date=history)
    prefix = "history " if history else ""
    return one_line(f"{prefix}{when} {text}"), style


def state_label(run: Run, now: datetime) -> str:
    """A run's true state for the live table: claimed runs have not started until their
    start comes, pending ones say when they are due."""
    if run.state is RunState.RUNNING:
        # Claimed ahead without a start yet: it starts when its worker gets to it, at its
        # instant at the soonest.
        start = run.started_at
        if start is None and run.available_at <= now:
            return "claimed, waiting to start"
        start = start or run.available_at
        if start > now:
            return f"claimed, starts in {_until(start - now)}"
    if run.state is RunState.PENDING and run.available_at > now:
        return f"due in {_until(run.available_at - now)}"
    return run.state.value


def _until(delta: timedelta) -> str:
    return duration(max(delta.total_seconds(), 0.0))
