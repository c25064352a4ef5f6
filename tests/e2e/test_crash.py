"""I4 with real processes: a worker SIGKILLed mid-run loses nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import cronwheel
from cronwheel.core.model import AttemptOutcome, Run, RunState
from tests.e2e.procs import REPO, free_port
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

WORKER = ["worker", "--app", "tests.e2e.app:worker", "--lease", "2", "--concurrency", "4"]


async def test_a_run_whose_worker_is_killed_is_finished_by_another(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    async with await cronwheel.connect(store_url) as cw:
        slow = await cw.create(
            name="slow", schedule={"kind": "immediate"}, action={"type": "handler", "name": "slow"}
        )
        quick = [
            await cw.create(
                name=f"quick-{i}",
                schedule={"kind": "immediate"},
                action={"type": "handler", "name": "quick"},
            )
            for i in range(10)
        ]
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "a.log") as first:
            await eventually(
                lambda: _true(any("-1-started-" in m.name for m in marks.iterdir())), timeout=60
            )
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "b.log"):
            await eventually(
                lambda: _all_succeeded(cw, [slow.id] + [q.id for q in quick]), timeout=60
            )
        [run] = await cw.runs(slow.id)
        attempts = await cw.attempts(run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST, AttemptOutcome.SUCCEEDED]
    assert attempts[0].worker_id != attempts[1].worker_id
    assert attempts[0].error_class == "LeaseExpired"
    assert run.attempt == 2


async def _all_succeeded(cw: cronwheel.JobService, job_ids: list[str]) -> bool:
    for job_id in job_ids:
        runs = await cw.runs(job_id)
        if [r.state for r in runs] != [RunState.SUCCEEDED]:
            return False
    return True


async def _true(value: bool) -> bool:
    await asyncio.sleep(0)
    return value


async def test_sigterm_drains_then_releases_and_another_worker_finishes(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    async with await cronwheel.connect(store_url) as cw:
        slow = await cw.create(
            name="slow", schedule={"kind": "immediate"}, action={"type": "handler", "name": "slow"}
        )
        with cronwheel_proc(
            *WORKER, "--grace", "1", "--db", store_url, env=env, log=tmp_path / "a.log"
        ) as first:
            await eventually(
                lambda: _true(any("-1-started-" in m.name for m in marks.iterdir())), timeout=60
            )
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=30) == 0  # a clean exit, well before any lease expiry
        [run] = await cw.runs(slow.id)
        assert run.state is RunState.PENDING
        [released] = await cw.attempts(run.id)
        assert (released.outcome, released.error_class) == (
            AttemptOutcome.CANCELLED,
            "WorkerShutdown",
        )
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "b.log"):
            await eventually(lambda: _all_succeeded(cw, [slow.id]), timeout=60)


async def test_sigterm_stops_within_the_grace_period_a_handler_deaf_to_cancellation(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    """Its thread goes on after the grace period, and Python joins executor threads at
    exit: the worker must not wait for it (issue 26: a worker with a 5 s grace took 37 s
    to stop). Its run is released as for any handler still running at the end of grace."""
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    log = tmp_path / "a.log"
    async with await cronwheel.connect(store_url) as cw:
        deaf = await cw.create(
            name="deaf", schedule={"kind": "immediate"}, action={"type": "handler", "name": "deaf"}
        )
        with cronwheel_proc(*WORKER, "--grace", "1", "--db", store_url, env=env, log=log) as w:
            await eventually(
                lambda: _true(any("-1-started-" in m.name for m in marks.iterdir())), timeout=60
            )
            signalled = time.monotonic()
            w.send_signal(signal.SIGTERM)
            assert w.wait(timeout=60) == 0
            took = time.monotonic() - signalled
        [run] = await cw.runs(deaf.id)
        [released] = await cw.attempts(run.id)
    # The grace period, and a few seconds for the release and the exit (the handler
    # would have held it 60 s).
    assert took < 1 + 10, f"stopped {took:.1f} s after SIGTERM:\n{log.read_text()}"
    assert "exiting without them" in log.read_text()
    assert run.state is RunState.PENDING
    assert (released.outcome, released.error_class) == (
        AttemptOutcome.CANCELLED,
        "WorkerShutdown",
    )


async def test_dev_killed_mid_run_is_recovered_at_once_by_the_next_dev_on_its_file(
    tmp_path: Path, marks: Path
) -> None:
    """``cronwheel dev`` holds its SQLite file's lock: the next one knows the previous is
    dead and rescues its runs at start, instead of waiting out their 30 s leases. A
    second dev beside a live one is refused."""
    url = f"sqlite:///{tmp_path / 'dev.db'}"
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    dev = ["dev", "--app", "tests.e2e.app:worker", "--db", url]
    async with await cronwheel.connect(url) as cw:
        slow = await cw.create(
            name="slow", schedule={"kind": "immediate"}, action={"type": "handler", "name": "slow"}
        )
        [run] = await cw.runs(slow.id)
        port = str(free_port())
        with cronwheel_proc(*dev, "--port", port, env=env, log=tmp_path / "a.log") as first:
            await eventually(
                lambda: _true(any("-1-started-" in m.name for m in marks.iterdir())), timeout=60
            )
            held = await cw.store.get_run("default", run.id)
            assert held is not None and held.lease_expires_at is not None
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        log = tmp_path / "b.log"
        with cronwheel_proc(*dev, "--port", str(free_port()), env=env, log=log) as second:
            await eventually(lambda: _all_succeeded(cw, [slow.id]), timeout=60)
            # the same file, while the second runs: refused, with the conflict code of docs/api.md
            third = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "cronwheel", *dev, "--port", str(free_port())),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            _, err = await asyncio.wait_for(third.communicate(), timeout=60)
            refused = err.decode()
            assert second.poll() is None
        attempts = await cw.attempts(run.id)
    assert third.returncode == 4, refused
    assert f"in use by another cronwheel dev (pid {second.pid})" in refused
    assert "Traceback" not in refused
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST, AttemptOutcome.SUCCEEDED]
    lost = attempts[0]
    assert lost.error_class == "WorkerGone"
    # rescued long before the dead process's lease would have expired
    assert lost.finished_at < held.lease_expires_at - timedelta(seconds=10)
    assert "recovered 1 run the previous cronwheel dev" in log.read_text()


async def test_a_worker_killed_after_a_checkpoint_is_resumed_from_it(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    """The handler checkpoints at 50 %; its worker is SIGKILLed once the store has the
    checkpoint; the next attempt, in another worker, starts from it."""
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    async with await cronwheel.connect(store_url) as cw:
        job = await cw.create(
            name="resumable",
            schedule={"kind": "immediate"},
            action={"type": "handler", "name": "resumable"},
        )
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "a.log") as first:
            half_way = await eventually(lambda: _checkpointed(cw, job.id, {"step": 5}), timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        assert (half_way.progress, half_way.progress_message) == (0.5, "step 5 of 10")
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "b.log"):
            await eventually(lambda: _all_succeeded(cw, [job.id]), timeout=60)
        [run] = await cw.runs(job.id)
    assert json.loads((marks / "resumed-1").read_text()) is None
    assert json.loads((marks / "resumed-2").read_text()) == {"step": 5}
    assert (marks / "steps-1").read_text().split() == ["0", "1", "2", "3", "4"]
    assert (marks / "steps-2").read_text().split() == ["5", "6", "7", "8", "9"]
    assert (run.attempt, run.checkpoint, run.progress) == (2, {"step": 10}, 1.0)


async def _checkpointed(cw: cronwheel.JobService, job_id: str, state: object) -> Run | None:
    runs = await cw.runs(job_id)
    return runs[0] if runs and runs[0].checkpoint == state else None
