"""The console's lines: one per event, never broken, and a run's true state."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from cronwheel.console import Output
from cronwheel.console.lines import one_line, stamp, state_label
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import Priority, Run, RunState

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def _run(**kw: object) -> Run:
    run = Run(
        id=7,
        tenant_id="default",
        job_id="j",
        scheduled_for=T0,
        available_at=T0,
        state=RunState.PENDING,
        pool="default",
        priority=Priority.NORMAL,
        attempt=0,
        max_attempts=3,
        fence=0,
        job_version=1,
        created_at=T0,
    )
    return replace(run, **kw)  # type: ignore[arg-type]


def test_a_claimed_run_is_not_running_before_its_start() -> None:
    clock = FrozenClock(T0 - timedelta(seconds=1.25))
    claimed = _run(state=RunState.RUNNING, attempt=1, started_at=T0, lease_owner="w1")
    assert state_label(claimed, clock.now()) == "claimed, starts in 1.2 s"
    clock.advance(1.25)
    assert state_label(claimed, clock.now()) == "running"
    later = _run(available_at=T0 + timedelta(seconds=3))
    assert state_label(later, clock.now()) == "due in 3.0 s"
    assert state_label(_run(), clock.now()) == "pending"


def test_a_run_claimed_ahead_is_not_running_before_its_worker_starts_it() -> None:
    # No start recorded yet: its instant is the soonest it may start, and past that it
    # waits for its worker (a slot, a connection), never "running".
    claimed = _run(state=RunState.RUNNING, attempt=1, lease_owner="w1")
    assert state_label(claimed, T0 - timedelta(seconds=2)) == "claimed, starts in 2.0 s"
    assert state_label(claimed, T0 + timedelta(seconds=5)) == "claimed, waiting to start"
    assert state_label(replace(claimed, started_at=T0), T0 + timedelta(seconds=5)) == "running"


def test_a_line_never_breaks() -> None:
    # Line breaks read as ⏎; every other control and bidi character is escaped as the
    # CLI and the text log escape it (cronwheel.core.text.escape_controls).
    shown = one_line("boom\r\nat line 2\n\tthen\x1b[31m\x9b\u202eend\r")
    assert shown == "boom⏎at line 2⏎\\tthen\\x1b[31m\\x9b\\u202eend\\r"
    assert stamp(T0 + timedelta(milliseconds=5)) == "12:00:00.005"
    assert stamp(T0, with_date=True) == "2030-01-01 12:00:00.000"


def test_a_pipe_gets_plain_lines_however_long() -> None:
    stream = io.StringIO()
    out = Output(stream)
    assert not out.terminal
    text = "run 1 job attempt 1/3 failed: [bold]" + "x" * 300 + "\nmore"
    out.line(text, "red")
    assert stream.getvalue() == text.replace("\n", "⏎") + "\n"  # no wrap, no markup, no blank
