"""``cronwheel dev``'s console, for real: each event once at its time, the history after a
restart, a run claimed ahead at a stop, a pool nobody serves."""

from __future__ import annotations

import signal
from datetime import UTC, datetime
from pathlib import Path

import cronwheel
from cronwheel.core.model import Run, RunState
from tests.e2e.app import LONG_ERROR
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.procs import free_port
from tests.engine.helpers import eventually


class Watched:
    """A process's output file, read as it grows: each line with the moment it appeared."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[tuple[datetime, str]] = []
        self._text = ""

    async def lines(self) -> list[str]:
        text = self.path.read_text() if self.path.exists() else ""
        now = datetime.now(UTC)
        if len(text) > len(self._text):
            complete = text[: text.rfind("\n") + 1]
            for line in complete[len(self._text) :].splitlines():
                self.seen.append((now, line))
            self._text = complete
        return [line for _, line in self.seen]

    async def has(self, fragment: str) -> bool:
        return any(fragment in line for line in await self.lines())


APP = ["--app", "tests.e2e.app:worker"]


async def test_dev_in_a_pipe_prints_each_event_once_at_its_time_and_history_after_a_restart(
    tmp_path: Path, marks: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    first = Watched(tmp_path / "first.log")
    args = ["dev", *APP, "--db", url]
    with cronwheel_proc(*args, "--port", str(free_port()), env=env, log=first.path) as proc:
        await eventually(lambda: first.has("live from"), timeout=60)
        async with await cronwheel.connect(url) as cw:
            job = await cw.create(
                name="fails-once",
                # due in 4 s: the worker claims it about 2 s ahead, and must not say so
                schedule={"kind": "delay", "seconds": 4},
                action={"type": "handler", "name": "fails-once"},
                retry={"max_attempts": 3, "backoff": "fixed", "initial_delay": 1},
            )
            [run] = await eventually(lambda: cw.runs(job.id), timeout=60)
        await eventually(lambda: first.has("attempt 2/3 succeeded"), timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    lines = await first.lines()
    assert "" not in lines  # no blank line
    events = [line for line in lines if line[:2].isdigit()]
    assert len(events) == len(set(events)), lines  # each event once
    mine = [line for line in events if f"run {run.id} " in line]
    assert [line.split(" ", 1)[1] for line in mine] == [
        f"run {run.id} fails-once attempt 1/3 started",
        f"run {run.id} fails-once attempt 1/3 failed in {_took(mine[1])}: RuntimeError: "
        + LONG_ERROR.replace("\n", "⏎")
        + f" → retry at {_retry_at(mine[1])}",
        f"run {run.id} fails-once attempt 2/3 started",
        f"run {run.id} fails-once attempt 2/3 succeeded in {_took(mine[3])}",
    ]  # attempt 1's failure on attempt 1's line, whole, on one line however long
    # nothing said of the run before it started, though it was claimed ahead of its start
    shown = min(at for at, line in first.seen if f"run {run.id} " in line)
    assert shown >= run.available_at, (shown, run.available_at)
    assert mine[0][:12] >= run.available_at.strftime("%H:%M:%S.%f")[:-3]  # its own time

    second = Watched(tmp_path / "second.log")
    with cronwheel_proc(*args, "--port", str(free_port()), env=env, log=second.path) as proc:
        await eventually(lambda: second.has("live from"), timeout=60)
        async with await cronwheel.connect(url) as cw:
            await cw.create(
                name="quick",
                schedule={"kind": "immediate"},
                action={"type": "handler", "name": "quick"},
            )
        await eventually(lambda: second.has("quick attempt 1/3 succeeded"), timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    lines = await second.lines()
    live = lines.index(next(line for line in lines if line.startswith("live from")))
    history = [line for line in lines[:live] if line.startswith("history ")]
    assert history[0].startswith("history (before this start")
    assert any(f"run {run.id} fails-once attempt 2/3 succeeded" in line for line in history)
    assert all(f"run {run.id} " not in line for line in lines[live:]), lines
    assert any("quick attempt 1/3 succeeded" in line for line in lines[live:])


async def test_dev_stopped_with_a_run_claimed_ahead_says_nothing_of_it_and_leaves_no_attempt(
    tmp_path: Path, marks: Path
) -> None:
    """A run the worker had claimed ahead of its instant (about 2 s) and not started when
    the process stopped used to be printed as ``attempt 1/3 cancelled: WorkerShutdown:
    released before it started`` and kept that attempt in its history: it had none."""
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    out = Watched(tmp_path / "dev.log")
    with cronwheel_proc(
        "dev", *APP, "--db", url, "--port", str(free_port()), env=env, log=out.path
    ) as proc:
        await eventually(lambda: out.has("live from"), timeout=60)
        async with await cronwheel.connect(url) as cw:
            job = await cw.create(
                name="later",
                schedule={"kind": "delay", "seconds": 5},
                action={"type": "handler", "name": "quick"},
            )

            async def claimed_ahead() -> Run | None:
                runs = await cw.runs(job.id)
                return runs[0] if runs and runs[0].state is RunState.RUNNING else None

            run = await eventually(claimed_ahead, timeout=60)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
            # The stop came before the run's instant: it had not started.
            assert datetime.now(UTC) < run.available_at, "the machine was too slow to test this"
            [after] = await cw.runs(job.id)
            attempts = await cw.attempts(after.id)
    lines = await out.lines()
    assert all(f"run {run.id} " not in line for line in lines), lines
    assert not any("WorkerShutdown" in line for line in lines), lines
    assert (after.state, after.attempt, after.max_attempts, after.available_at) == (
        RunState.PENDING,
        0,
        3,
        run.available_at,
    )
    assert attempts == []


def _took(line: str) -> str:
    return line.split(" in ", 1)[1].split(":", 1)[0].split(" → ")[0]


def _retry_at(line: str) -> str:
    return line.rsplit("→ retry at ", 1)[1]


async def test_dev_says_once_that_no_worker_serves_a_jobs_pool(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    out = Watched(tmp_path / "dev.log")
    args = ["dev", *APP, "--db", url, "--port", str(free_port())]
    with cronwheel_proc(*args, log=out.path) as proc:
        await eventually(lambda: out.has("live from"), timeout=60)
        async with await cronwheel.connect(url) as cw:
            job = await cw.create(
                name="mailer",
                schedule={"kind": "immediate"},
                action={"type": "handler", "name": "quick"},
                pool="email",
            )
            notice = "job mailer waits: no worker serves pool 'email' (this dev process serves:"
            await eventually(lambda: out.has(notice), timeout=60)
            # the job is not refused: its run waits, pending
            [run] = await cw.runs(job.id)
            assert run.state is RunState.PENDING
            await cw.create(
                name="quick",
                schedule={"kind": "immediate"},
                action={"type": "handler", "name": "quick"},
            )
            await eventually(lambda: out.has("quick attempt 1/3 succeeded"), timeout=60)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    lines = await out.lines()
    [said] = [line for line in lines if notice in line]
    assert said.endswith("(this dev process serves: default)"), said
