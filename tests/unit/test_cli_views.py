"""The CLI's views, as pure functions: which columns fit, and what a job or a run says
with and without the fields a newer server adds (``last_run``, ``notices``)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from cronwheel.cli.describe import job_lines, run_lines, schedule_words
from cronwheel.cli.remote.status import render
from cronwheel.cli.tables import Column, fit, rich_table, tsv_lines

JOB_ID = "01a20aee-b808-7000-8a6d-746a4710197a"
TIME = "2026-11-24T00:20:00.123456+00:00"


def test_columns_are_left_out_by_rank_never_cut() -> None:
    columns = [
        Column("id", kind="id"),
        Column("name", kind="text"),
        Column("state", rank=1),
        Column("at", kind="time", rank=2),
        Column("pool", rank=3),
        Column("empty", rank=1),
    ]
    cells = [[JOB_ID, "a name that is long enough to wrap", "active", TIME, "default", ""]]
    assert fit(columns, cells, 200) == [0, 1, 2, 3, 4]  # an empty column is not worth room
    # 80 columns: the time (32) no longer fits beside the id, the name and the state.
    assert fit(columns, cells, 80) == [0, 1, 2, 4]
    # Too narrow for anything but what is always shown: that is still shown whole.
    assert fit(columns, cells, 20) == [0, 1]


def _job(**changes: Any) -> dict[str, Any]:
    return {
        "id": JOB_ID,
        "tenant_id": "default",
        "name": "nightly",
        "schedule": {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"},
        "action": {"type": "handler", "name": "report"},
        "pool": "default",
        "payload": None,
        "priority": "normal",
        "retry": {"max_attempts": 1, "backoff": "fixed", "initial_delay": 1, "max_delay": 1},
        "timeout_seconds": 300,
        "misfire": {"mode": "fire_once", "limit": 100},
        "overlap": "allow",
        "jitter_seconds": 0,
        "catchup_seconds": 60,
        "delivery": "at_least_once",
        "state": "active",
        "version": 2,
        "next_fire_at": "2026-11-25T01:30:00+00:00",
        "last_fire_at": None,
        "created_at": TIME,
        "updated_at": TIME,
        **changes,
    }


def test_a_job_without_the_newer_fields_reads_as_before() -> None:
    text = "\n".join(job_lines(_job()))
    assert "last run" not in text and "notice" not in text
    assert "retry:           up to 1 attempt\n" in text + "\n"


def test_a_job_shows_its_last_run_and_its_notices_when_the_server_sends_them() -> None:
    last_run = {
        "id": 41,
        "state": "dead",
        "scheduled_for": TIME,
        "finished_at": "2026-11-24T00:20:03+00:00",
        "attempt": 3,
        "reason": "attempts exhausted",
        "last_error": "HTTP 500 from https://example.com",
    }
    notice = {"code": "no_live_worker", "message": "no live worker serves pool 'email'"}
    lines = job_lines(
        _job(state="completed", next_fire_at=None, last_run=last_run, notices=[notice])
    )
    text = "\n".join(lines)
    assert (
        "last run:        #41 dead (attempts exhausted) after attempt 3, 2026-11-24T00:20:03+00:00"
        in lines
    )
    assert "error: HTTP 500 from https://example.com" in text
    assert "notice:          ! no live worker serves pool 'email' [no_live_worker]" in lines
    assert "next fires:      none: the job is completed" in lines


def test_a_run_shows_its_notices_and_says_when_it_has_no_attempt_yet() -> None:
    run = {
        "id": 7,
        "job_id": JOB_ID,
        "state": "pending",
        "scheduled_for": TIME,
        "available_at": TIME,
        "attempt": 0,
        "max_attempts": 3,
        "pool": "email",
        "priority": "normal",
        "fence": 0,
        "idempotency_key": f"{JOB_ID}:{TIME}",
        "notices": [{"code": "no_live_worker", "message": "no live worker serves pool 'email'"}],
        "attempts": [],
    }
    lines = run_lines(run)
    assert "attempts:        none yet" in lines
    assert "notice:          ! no live worker serves pool 'email' [no_live_worker]" in lines
    assert "started:         not yet" in lines
    claimed = run_lines({**run, "state": "running", "attempt": 1, "lease_owner": "w1"})
    assert "started:         not yet: claimed, waiting to start" in claimed


def test_schedules_in_words() -> None:
    assert schedule_words({"kind": "interval", "every_seconds": 300}) == "every 5 min"
    assert schedule_words({"kind": "delay", "seconds": 90}) == "once, 90 s after it was created"
    assert schedule_words({"kind": "manual"}).startswith("manual")
    quartz = {"kind": "cron", "cron": "0 0 2 ? * MON", "timezone": "UTC", "dialect": "quartz"}
    assert schedule_words(quartz) == "cron 0 0 2 ? * MON in UTC (dialect quartz)"


def test_a_run_shows_its_progress_and_checkpoint_a_long_one_cut_with_a_hint() -> None:
    base = {"id": 7, "job_id": JOB_ID, "state": "running", "attempt": 1, "max_attempts": 3}
    assert not any(line.startswith(("progress", "checkpoint")) for line in run_lines(base))
    run = {
        **base,
        "progress": {"fraction": 0.333, "message": "page 3 of 9", "at": TIME},
        "checkpoint": {"state": {"ids": list(range(500))}, "at": TIME},
    }
    lines = run_lines(run)
    assert "progress:        33 % (page 3 of 9)" in lines
    assert f"progress at:     {TIME}" in lines
    [checkpoint] = [line for line in lines if line.startswith("checkpoint:")]
    assert checkpoint.startswith('checkpoint:      {"ids": [0, 1, 2')
    assert checkpoint.endswith("… (2399 characters; --json shows it whole)")
    assert f"checkpoint at:   {TIME}" in lines


def test_a_cell_is_escaped_and_never_read_as_rich_markup() -> None:
    row = {"name": "a\x1b[2J\x9b\u202eb\tc\nd [bold]e[/]"}
    [cell] = [Column("name", kind="text").cell(row)]
    assert cell == "a\\x1b[2J\\x9b\\u202eb\\tc\\nd [bold]e[/]"
    assert tsv_lines([Column("name")], [[cell]]) == ["name", cell]
    console = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    console.print(rich_table([row], [Column("name", kind="text")], 120))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert cell in screen, screen  # "[/]" would have been a MarkupError


def test_the_status_screen_escapes_what_the_server_says() -> None:
    report = {
        "store": {"reachable": False, "error": "down\x1b[2J"},
        "scope": "tenant",
        "tenant_id": "t\u202e1",
        "healthy": False,
        "version": "1",
        "window_minutes": 5,
        "now": TIME,
        "problems": ["job \x9bx waits"],
        "notes": ["note\r"],
        "pools": [],
        "workers": [],
        "schedulers": [],
        "shards": {"owned": 0, "total": 64},
        "maintenance": {"active": True, "owner": "w\x85", "expires_at": TIME},
    }
    console = Console(file=io.StringIO(), width=200, force_terminal=True, color_system=None)
    console.print(render(report, 200))
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    for shown in ("down\\x1b[2J", "t\\u202e1", "job \\x9bx waits", "note\\r", "w\\x85"):
        assert shown in screen, screen
    assert not set(screen) & {"\x1b", "\x9b", "\u202e", "\r", "\x85"}
