"""When a job runs next, in one line a person reads at once.

A job's next run is not a row until the scheduler creates it, shortly before it is due
(a ``delay`` job made for 60 s from now has no run for 58 s), so a table of runs, or a
job table too narrow for its ``next_fire_at``, says nothing of it. These lines say it:
after a job is created or changed, and when a job has no runs to list. They go to
stderr, beside the ``more: --cursor`` hint: stdout stays the table, and in a pipe the
table stays tab-separated values a script can read.

Relative times ("in 58 s") are measured against ``now``, which callers pass in (the
CLI: this machine's clock; tests: a fixed instant). The absolute time is always given
too where a line names a time, so a clock that is off misleads by its error only.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


def span(seconds: float) -> str:
    """A length of time in its two largest units, whole: ``58 s``, ``4 min 5 s``,
    ``3 h``, ``2 d 4 h`` (the smaller units are left out, never rounded up)."""
    left = round(abs(seconds))
    parts: list[tuple[int, str]] = []
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count or parts:
            parts.append((count, unit))
        if len(parts) == 2:
            break
    shown = [f"{count} {unit}" for count, unit in parts if count]
    return " ".join(shown) or "0 s"


def until(when: Any, now: datetime) -> str:
    """``in 58 s``, ``now`` or ``due 3 s ago`` for an instant (a datetime or ISO text);
    nothing for no instant."""
    instant = _instant(when)
    if instant is None:
        return ""
    seconds = (instant - now).total_seconds()
    if abs(seconds) < 0.5:
        return "now"
    return f"in {span(seconds)}" if seconds > 0 else f"due {span(seconds)} ago"


def next_in(job: Mapping[str, Any], now: datetime) -> str:
    """A job's next fire time relative to ``now``: ``paused`` for a paused job (it keeps
    its ``next_fire_at`` but will not fire at it), nothing for a job that is not active."""
    if job.get("state") == "paused":
        return "paused"
    if job.get("state") != "active":
        return ""
    return until(job.get("next_fire_at"), now)


def next_fire(job: Mapping[str, Any]) -> Any:
    """A job's next fire time as a table shows it whole: ``paused`` for a paused job, as
    the API gives it for any other."""
    return "paused" if job.get("state") == "paused" else job.get("next_fire_at")


def fire_line(job: Mapping[str, Any], now: datetime) -> str:
    """When a job fires next, or why it does not by itself: the line shown after a job
    is created, changed, paused or resumed."""
    state = job.get("state")
    kind = (job.get("schedule") or {}).get("kind")
    due = _instant(job.get("next_fire_at"))
    if state == "active" and due is not None:
        return f"next fire: {_when(due, job, now)}"
    if kind == "immediate":
        return (
            "next fire: none: an immediate job's one run is created with it"
            f" (cronwheel jobs runs {_ref(job)})"
        )
    if state == "paused":
        return (
            "next fire: none while paused"
            f" (resume to plan again: cronwheel jobs resume {_ref(job)})"
        )
    if state in ("completed", "cancelled"):
        return f"next fire: none: the job is {state}"
    if kind == "manual":
        return (
            "next fire: never by itself: a manual job runs when triggered or enqueued to"
            f" (cronwheel jobs trigger {_ref(job)})"
        )
    return "next fire: none planned"


def no_runs_line(job: Mapping[str, Any], now: datetime, state_filter: str | None = None) -> str:
    """Why a job has no runs to list (first page empty), and when it will have one."""
    if state_filter:
        head = f"no {state_filter} runs"
    else:
        head = "no runs" if job.get("last_fire_at") else "no runs yet"
    state = job.get("state")
    kind = (job.get("schedule") or {}).get("kind")
    due = _instant(job.get("next_fire_at"))
    if state == "active" and due is not None:
        if due > now:
            return (
                f"{head}: the next is due at {_when(due, job, now)};"
                " the scheduler creates its run shortly before"
            )
        return (
            f"{head}: the next was due at {_when(due, job, now)} and its run is not"
            " created yet: is a scheduler running (cronwheel scheduler, or cronwheel dev)?"
        )
    if state == "paused":
        return (
            f"{head}: the job is paused, so none are planned until it is resumed"
            f" (cronwheel jobs resume {_ref(job)})"
        )
    if state in ("completed", "cancelled"):
        return f"{head}: the job is {state}"
    if kind == "manual":
        return (
            f"{head}: a manual job runs only when triggered or enqueued to"
            f" (cronwheel jobs trigger {_ref(job)}, or cronwheel jobs enqueue)"
        )
    return f"{head}, and none planned"


def _when(due: datetime, job: Mapping[str, Any], now: datetime) -> str:
    """``2026-11-24T13:25:00+00:00 (in 60 s)``, with a cron job's wall time in its own
    zone when that is not UTC."""
    words = until(due, now)
    zone = _zone(job.get("schedule") or {})
    if zone is not None:
        words += f"; {due.astimezone(zone):%a %Y-%m-%d %H:%M:%S} {zone.key}"
    return f"{due.isoformat()} ({words})"


def _ref(job: Mapping[str, Any]) -> str:
    """How a follow-up command names the job: by its name, quoted for a shell, as the
    CLI accepts it (the live job of a name is the one meant), else by its id."""
    name = job.get("name")
    return shlex.quote(str(name)) if name else str(job.get("id"))


def _zone(schedule: Mapping[str, Any]) -> ZoneInfo | None:
    if schedule.get("kind") != "cron" or schedule.get("timezone", "UTC") == "UTC":
        return None
    try:
        return ZoneInfo(str(schedule.get("timezone")))
    except (ValueError, KeyError, OSError):
        return None


def _instant(value: Any) -> datetime | None:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return None
