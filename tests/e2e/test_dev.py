"""``cronwheel dev --demo`` and a per-second cron job, for real, on real time."""

from __future__ import annotations

import asyncio
import itertools
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import cronwheel
from cronwheel.core.model import Run, RunState
from cronwheel.engine.maintenance import Maintenance
from cronwheel.engine.runtime import serve
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.worker import Worker, WorkerConfig
from tests.e2e.app import LONG_ERROR
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.e2e.procs import free_port
from tests.engine.helpers import eventually


async def test_dev_demo_serves_the_api_and_shows_runs_succeeding_and_one_dead_lettered(
    tmp_path: Path,
) -> None:
    port = free_port()
    args = ["dev", "--demo", "--db", f"sqlite:///{tmp_path / 'dev.db'}", "--port", str(port)]
    log = tmp_path / "dev.log"
    with cronwheel_proc(*args, "--duration", "12", log=log) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:

            async def jobs() -> list[str]:
                try:
                    response = await api.get("/v1/jobs")
                except httpx.TransportError:
                    return []
                return sorted(j["name"] for j in response.json()["items"])

            names = await eventually(jobs, timeout=60)
        assert names == ["demo-every-5s", "demo-flaky", "demo-once", "demo-webhook"]
        assert proc.wait(timeout=120) == 0
    out = log.read_text()
    assert "without authentication" in out or "no authentication" in out
    assert "demo: 4 example jobs created" in out
    # Its webhook target is on this machine: dev on loopback allows it, and says so.
    assert "webhooks may reach this machine (loopback)" in out
    for line in (
        "demo-once attempt 1/3 succeeded",
        "demo-every-5s attempt 1/3 succeeded",
        "demo-webhook attempt 1/3 succeeded",
        "demo-flaky attempt 3/3 failed",
    ):
        assert line in out, out
    [dead] = [line for line in out.splitlines() if "demo-flaky attempt 3/3 failed" in line]
    # The line says what became of the run, and why.
    assert dead.endswith("→ run dead (attempts exhausted: attempt 3 of 3 failed)"), dead
    assert "stopped" in out


@pytest.mark.both_stores  # the stores differ here
async def test_a_cron_every_second_fires_each_occurrence_once_for_30_seconds(
    store_url: str,
) -> None:
    async with await cronwheel.connect(store_url) as cw:
        job = await cw.create(
            name="every-second",
            schedule={"kind": "cron", "cron": "* * * * * *", "timezone": "Asia/Kolkata"},
            action={"type": "handler", "name": "tick"},
        )
        worker = Worker(cw.store, WorkerConfig(pools={"default": 4}))
        worker.handler("tick")(lambda ctx: None)
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(30, stop.set)
        await serve([Scheduler(cw.store), worker, Maintenance(cw.store)], stop=stop)
        await cw.pause(job.id)
        runs = sorted(await cw.runs(job.id, limit=1000), key=lambda r: r.scheduled_for)
        succeeded = [r for r in runs if r.state is RunState.SUCCEEDED]
    # the last second or two may still be pending or released at the stop
    assert len(succeeded) >= 27, [(r.scheduled_for, r.state) for r in runs]
    instants = [r.scheduled_for for r in runs]
    assert len(set(instants)) == len(instants)  # each occurrence once
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(instants))  # no gaps
    assert all(r.attempt == 1 for r in succeeded)
    assert instants[0] - job.created_at <= timedelta(seconds=1)


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


async def test_dev_demo_restarts_on_its_file_and_renews_the_jobs_of_this_start(
    tmp_path: Path,
) -> None:
    """A restart used to stop at ``state: the job is cancelled`` (the flaky job cancelled
    by the start before), and the webhook job kept the dead echo endpoint's URL."""
    args = ["dev", "--demo", "--db", f"sqlite:///{tmp_path / 'dev.db'}"]
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    for log, duration in ((first, "2"), (first.with_suffix(".2"), "2"), (second, "12")):
        port = str(free_port())
        with cronwheel_proc(*args, "--port", port, "--duration", duration, log=log) as proc:
            assert proc.wait(timeout=120) == 0, log.read_text()
    out = second.read_text()
    assert "demo: 2 example jobs created" in out, out
    live = out.split("live from", 1)[1]
    assert "demo-webhook attempt 1/3 succeeded" in live, out


@pytest.mark.both_stores  # the stores differ here
async def test_dev_on_postgresql_rides_out_a_failing_read(store_url: str, tmp_path: Path) -> None:
    """A store error in one service is reported and retried: `cronwheel dev` stays up.
    Its console read the store with no retry, and a deadlock reported to one of its
    reads took the whole process down (CI, 2026-11-25). Here every read of a run fails
    for a while: the view they read is renamed away, then back."""
    if not store_url.startswith("postgresql"):
        return  # the failure is made with PostgreSQL's catalog
    port = free_port()
    log = tmp_path / "dev.log"
    args = ["dev", "--db", store_url, "--port", str(port), "--duration", "90"]
    with cronwheel_proc(*args, log=log) as proc:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as api:

            async def ready() -> bool:
                try:
                    return (await api.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(ready, timeout=60)
            async with await cronwheel.connect(store_url) as cw:
                store: Any = cw.store
                async with store._connection() as conn:
                    await conn.execute("ALTER VIEW all_runs RENAME TO all_runs_away")

                    async def console_failed() -> bool:
                        await asyncio.sleep(0)
                        return proc.poll() is not None or "for the console failed" in (
                            log.read_text(errors="replace")
                        )

                    try:
                        await eventually(console_failed, timeout=60)
                    finally:
                        await conn.execute("ALTER VIEW all_runs_away RENAME TO all_runs")
            assert proc.poll() is None, log.read_text(errors="replace")
            job = await eventually(lambda: _create_webhookless(api), timeout=60)
            run = (await api.post(f"/v1/jobs/{job}/trigger")).json()

            async def dead() -> bool:  # no handler of that name: one failed attempt
                got = await api.get(f"/v1/runs/{run['id']}")
                return got.status_code == 200 and got.json()["state"] == "dead"

            await eventually(dead, timeout=60)
            assert proc.poll() is None, log.read_text(errors="replace")


async def _create_webhookless(api: httpx.AsyncClient) -> str | None:
    spec = {
        "name": "after-the-cut",
        "schedule": {"kind": "manual"},
        "action": {"type": "handler", "name": "nobody-serves-this"},
        "retry": {"max_attempts": 1},
    }
    try:
        got = await api.post("/v1/jobs", json=spec)
    except httpx.TransportError:
        return None
    return str(got.json()["id"]) if got.status_code == 201 else None
