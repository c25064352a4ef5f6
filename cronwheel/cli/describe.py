"""``jobs get`` and ``runs get`` as a person reads them: labelled lines, every value
whole (ids and times are never cut), the same text on a terminal and in a pipe.

A job shows its schedule in words with its next fire times, its action, every policy,
its state and version, and its last outcome; a run shows its state and why, and each of
its attempts. Fields a newer server adds (``last_run``, ``notices``) are shown when they
are there and not missed when they are not.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronwheel.cli.tables import text
from cronwheel.core.text import escape_controls
from cronwheel.schedule import next_fire, schedule_from_dict
from cronwheel.security.redact import MASK, is_secret_header, mask_url

NEXT_FIRES = 5
_LABEL = 17


def job_lines(job: Mapping[str, Any]) -> list[str]:
    """A whole job, one labelled line per fact."""
    lines = [
        _line("id", job.get("id")),
        _line("name", job.get("name")),
        _line("tenant", job.get("tenant_id")),
        _line("state", f"{job.get('state')} (version {job.get('version')})"),
        _line("schedule", schedule_words(job.get("schedule") or {})),
    ]
    fires = list(next_fires(job))
    lines.append(_line("next fires", fires[0] if fires else _no_fire(job)))
    lines += [_line("", fire) for fire in fires[1:]]
    lines.append(_line("last fired", text(job.get("last_fire_at")) or "never"))
    lines += _last_run(job.get("last_run"))
    lines += _notices(job.get("notices"))
    lines += [
        _line("action", line) if i == 0 else _line("", line)
        for i, line in enumerate(action_words(job.get("action") or {}))
    ]
    lines += [
        _line("payload", _json(job.get("payload"))),
        _line("pool", job.get("pool")),
        _line("priority", job.get("priority")),
        _line("retry", retry_words(job.get("retry") or {})),
        _line("timeout", _seconds(job.get("timeout_seconds"))),
        _line("misfire", misfire_words(job.get("misfire") or {})),
        _line("overlap", job.get("overlap")),
        _line("delivery", job.get("delivery")),
        _line("jitter", _seconds(job.get("jitter_seconds"))),
        _line("catch-up", _seconds(job.get("catchup_seconds"))),
        _line("created", job.get("created_at")),
        _line("updated", job.get("updated_at")),
    ]
    return lines


def run_lines(run: Mapping[str, Any]) -> list[str]:
    """A run and each of its attempts."""
    state = str(run.get("state"))
    if run.get("reason"):
        state += f" (reason: {run['reason']})"
    if run.get("cancel_requested") and run.get("state") == "running":
        state += ", cancel requested"
    lines = [
        _line("run", run.get("id")),
        _line("job", run.get("job_id")),
        _line("state", state),
        _line("scheduled for", run.get("scheduled_for")),
        _line("available at", run.get("available_at")),
        _line("attempt", f"{run.get('attempt')} of {run.get('max_attempts')}"),
        _line("pool", run.get("pool")),
        _line("priority", run.get("priority")),
        _line("fence", run.get("fence")),
    ]
    if run.get("lease_owner"):
        lines.append(
            _line("lease", f"{run['lease_owner']} until {text(run.get('lease_expires_at'))}")
        )
    # A running run without a start was claimed ahead: its worker has not begun it.
    claimed = "not yet: claimed, waiting to start" if run.get("state") == "running" else ""
    lines += [
        _line("started", text(run.get("started_at")) or claimed or "not yet"),
        _line("finished", text(run.get("finished_at")) or "not yet"),
    ]
    if run.get("last_error"):
        lines.append(_line("last error", run["last_error"]))
    lines.append(_line("idempotency key", run.get("idempotency_key")))
    if run.get("payload") is not None:
        lines.append(_line("payload", _json(run["payload"])))
    lines += _reports(run.get("progress"), run.get("checkpoint"))
    lines += _notices(run.get("notices"))
    attempts = run.get("attempts")
    if attempts is not None:
        lines.append(_line("attempts", len(attempts) or "none yet"))
        for attempt in attempts:
            lines += attempt_lines(attempt)
    return lines


CHECKPOINT_SHOWN = 400
"""The longest checkpoint ``runs get`` prints (characters of its JSON); ``--json`` shows
any checkpoint whole."""


def _reports(progress: Any, checkpoint: Any) -> list[str]:
    """What the handler last reported: its progress and its checkpoint, each with the time
    it was stored. Nothing from a server that does not report them."""
    lines = []
    if isinstance(progress, Mapping):
        shown = f"{float(progress.get('fraction') or 0) * 100:.0f} %"
        if progress.get("message"):
            shown += f" ({progress['message']})"
        lines += [_line("progress", shown), _line("progress at", progress.get("at"))]
    if isinstance(checkpoint, Mapping):
        state = _json(checkpoint.get("state"))
        if len(state) > CHECKPOINT_SHOWN:
            state = f"{state[:CHECKPOINT_SHOWN]}… ({len(state)} characters; --json shows it whole)"
        lines += [_line("checkpoint", state), _line("checkpoint at", checkpoint.get("at"))]
    return lines


def attempt_lines(attempt: Mapping[str, Any]) -> list[str]:
    """One attempt as a short block: it never needs more width than its longest value."""
    head = f"  #{attempt.get('attempt')}  {attempt.get('outcome')}"
    lines = [head]
    lines.append(f"    worker    {attempt.get('worker_id') or '-'}  (fence {attempt.get('fence')})")
    lines.append(f"    started   {text(attempt.get('started_at')) or '-'}")
    lines.append(f"    finished  {text(attempt.get('finished_at')) or '-'}")
    timing = []
    duration = _duration(attempt.get("started_at"), attempt.get("finished_at"))
    if duration is not None:
        timing.append(f"ran {duration:.3f} s")
    if attempt.get("lag_seconds") is not None:
        timing.append(f"started {float(attempt['lag_seconds']):.3f} s after it was due")
    if timing:
        lines.append(f"    timing    {', '.join(timing)}")
    if attempt.get("error_class") or attempt.get("error_message"):
        error = ": ".join(
            str(p) for p in (attempt.get("error_class"), attempt.get("error_message")) if p
        )
        lines.append(f"    error     {error}")
    return lines + _output_lines(attempt.get("output"))


OUTPUT_LINES = 10
"""The last lines of each of a command's streams ``runs get`` prints; ``--json`` shows
all that was kept (the last 64 KiB)."""


def _output_lines(output: Any) -> list[str]:
    """A command's exit, and the last lines of its stdout and stderr."""
    if not isinstance(output, Mapping):
        return []
    if output.get("signal"):
        lines = [f"    exit      killed by {output['signal']}"]
    else:
        lines = [f"    exit      code {output.get('exit_code')}"]
    for stream in ("stdout", "stderr"):
        kept = str(output.get(stream) or "").rstrip("\n").splitlines()
        if not kept:
            continue
        shown = kept[-OUTPUT_LINES:]
        more = (
            f" (its last {len(shown)} lines; --json shows more)" if len(kept) > len(shown) else ""
        )
        lines.append(f"    {stream}{more}")
        # A tenant's output: nothing in it reaches the terminal as a control sequence.
        lines += [f"      {escape_controls(line)}" for line in shown]
    return lines


# -- the schedule ------------------------------------------------------------------------
def schedule_words(schedule: Mapping[str, Any]) -> str:
    """``cron 30 2 * * * in Europe/Paris``, ``every 5 min``, ``once at …``…"""
    kind = schedule.get("kind")
    if kind == "cron":
        words = f"cron {schedule.get('cron')} in {schedule.get('timezone', 'UTC')}"
        extras = [
            f"{k} {schedule[k]}" for k in ("dialect", "dst_gap", "dst_overlap") if k in schedule
        ]
        words += f" ({', '.join(extras)})" if extras else ""
    elif kind == "interval":
        words = f"every {_seconds(schedule.get('every_seconds'))}"
        if schedule.get("anchor"):
            words += f" from {schedule['anchor']}"
    elif kind == "once":
        words = f"once, at {schedule.get('at')}"
    elif kind == "delay":
        words = f"once, {_seconds(schedule.get('seconds'))} after it was created"
    elif kind == "immediate":
        words = "once, as soon as it was created"
    elif kind == "manual":
        return "manual: runs only when triggered or enqueued to"
    else:
        return _json(dict(schedule))
    if schedule.get("start_at"):
        words += f", not before {schedule['start_at']}"
    if schedule.get("end_at"):
        words += f", not after {schedule['end_at']}"
    return words


def next_fires(job: Mapping[str, Any], count: int = NEXT_FIRES) -> Iterator[str]:
    """The job's next fire times: its ``next_fire_at``, then what its schedule says
    after it (a cron job's also in its own zone's wall time)."""
    first = _instant(job.get("next_fire_at"))
    if first is None or job.get("state") != "active":
        return
    schedule_data = job.get("schedule") or {}
    zone = _zone(schedule_data)
    try:
        schedule = schedule_from_dict(schedule_data)
    except (ValueError, TypeError, ArithmeticError):
        schedule = None  # a schedule this CLI cannot read (a newer server): the first only
    fire: datetime | None = first
    for _ in range(count):
        if fire is None:
            return
        yield _fire_words(fire, zone)
        if schedule is None:
            return
        try:
            fire = next_fire(schedule, fire)
        except (ValueError, ArithmeticError):
            return


def _fire_words(fire: datetime, zone: ZoneInfo | None) -> str:
    shown = fire.isoformat()
    if zone is not None and zone.key != "UTC":
        wall = fire.astimezone(zone)
        shown += f"  ({wall:%a %Y-%m-%d %H:%M:%S} {zone.key})"
    return shown


def _no_fire(job: Mapping[str, Any]) -> str:
    state = job.get("state")
    if state == "paused":
        return "none while paused (resume to plan again)"
    if state in ("completed", "cancelled"):
        return f"none: the job is {state}"
    if (job.get("schedule") or {}).get("kind") == "manual":
        return "none: it runs when triggered or enqueued to"
    return "none"


def _zone(schedule: Mapping[str, Any]) -> ZoneInfo | None:
    if schedule.get("kind") != "cron":
        return None
    try:
        return ZoneInfo(str(schedule.get("timezone", "UTC")))
    except (ValueError, KeyError, OSError):
        return None


# -- the action and the policies -------------------------------------------------------
def action_words(action: Mapping[str, Any]) -> list[str]:
    """A webhook's method and URL and its headers (secret ones masked: the API may
    already have masked them), or a handler's name."""
    if action.get("type") == "webhook":
        lines = [f"webhook {action.get('method', 'POST')} {mask_url(str(action.get('url')))}"]
        headers = action.get("headers") or {}
        lines += [f"  {name}: {_masked(name, value)}" for name, value in headers.items()]
        if action.get("body") is not None:
            lines.append(f"  body: {_json(action['body'])}")
        return lines
    if action.get("type") == "handler":
        return [f"handler {action.get('name')}"]
    if action.get("type") == "publish":
        lines = [f"publish to {action.get('to')} on broker {action.get('broker')}"]
        if action.get("body") is not None:
            lines.append(f"  body: {_json(action['body'])}")
        return lines
    if action.get("type") == "command":
        argv = [str(a) for a in action.get("argv") or ()]
        lines = [f"command {shlex.join(argv)}"]
        if action.get("cwd"):
            lines.append(f"  in {action['cwd']}")
        env = action.get("env") or {}
        listed = {str(n) for n in action.get("secret_env") or ()}
        lines += [
            f"  {name}={MASK if name in listed else _masked(name, value)}"
            for name, value in env.items()
        ]
        return lines
    return [_json(dict(action))]


def retry_words(retry: Mapping[str, Any]) -> str:
    attempts = retry.get("max_attempts")
    words = f"up to {attempts} attempt{'s' if attempts != 1 else ''}"
    if attempts != 1:
        words += (
            f", {retry.get('backoff')} backoff from {_seconds(retry.get('initial_delay'))}"
            f" up to {_seconds(retry.get('max_delay'))}"
        )
    if retry.get("budget_seconds") is not None:
        words += f", within {_seconds(retry['budget_seconds'])} in all"
    return words


def misfire_words(misfire: Mapping[str, Any]) -> str:
    """The limit only means something to the modes that run several missed times."""
    mode = misfire.get("mode")
    if mode == "backfill":
        return f"backfill (at most {misfire.get('limit')} missed runs)"
    if mode == "fire_last":
        return f"fire_last (the last {misfire.get('limit')} missed runs)"
    return str(mode)


def _last_run(last: Any) -> list[str]:
    if not isinstance(last, Mapping):
        return [] if last is None else [_line("last run", _json(last))]
    words = f"#{last.get('id')} {last.get('state')}"
    if last.get("reason"):
        words += f" ({last['reason']})"
    if last.get("attempt") is not None:
        words += f" after attempt {last['attempt']}"
    when = last.get("finished_at") or last.get("scheduled_for")
    if when:
        words += f", {when}"
    lines = [_line("last run", words)]
    if last.get("last_error"):
        lines.append(_line("", f"error: {last['last_error']}"))
    return lines


def _notices(notices: Any) -> list[str]:
    if not notices:
        return []
    lines = []
    for i, notice in enumerate(notices):
        message = notice.get("message") if isinstance(notice, Mapping) else notice
        code = notice.get("code") if isinstance(notice, Mapping) else None
        shown = f"! {message}" + (f" [{code}]" if code else "")
        lines.append(_line("notice" if i == 0 else "", shown))
    return lines


# -- small words -------------------------------------------------------------------------
def _line(label: str, value: Any) -> str:
    shown = text(value)
    return f"{label + ':' if label else '':<{_LABEL}}{shown}".rstrip()


def _json(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    seconds = float(value)
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def _masked(name: str, value: Any) -> str:
    # The API masks these already; an older server may not, so the CLI does too.
    return MASK if is_secret_header(name) else str(value)


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            return _instant(datetime.fromisoformat(value))
        except ValueError:
            return None
    return None


def _duration(started: Any, finished: Any) -> float | None:
    start, end = _instant(started), _instant(finished)
    if start is None or end is None:
        return None
    return (end - start).total_seconds()
