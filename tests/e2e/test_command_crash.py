"""A `cronwheel worker` SIGKILLed in the middle of a command (issue 30 item 1): the
command's whole process group is stopped (its supervisor sees the worker's end of the
lifeline close), well within the run's lease, and the run is then run again or dead, as
its retry policy says."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

import cronwheel
from cronwheel.core.model import AttemptOutcome, RetryPolicy, RunState
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually
from tests.engine.test_commands import gone

pytestmark = pytest.mark.both_stores

LEASE = 5.0
WORKER = ["worker", "--pool", "default", "--lease", str(LEASE), "--command-grace", "1"]
WORKER += ["--allow-command", "/bin/sh"]
# Each attempt records its shell's and its grandchild's pids; the first one then waits
# for its grandchild (five minutes), every later one succeeds at once.
SCRIPT = (
    'sleep 300 & echo "$$ $!" > "$MARKS/$CRONWHEEL_ATTEMPT";'
    ' if [ "$CRONWHEEL_ATTEMPT" = 1 ]; then wait; fi'
)


async def _pids(marks: Path, attempt: int) -> list[int]:
    async def written() -> list[int] | None:
        path = marks / str(attempt)
        text = path.read_text() if path.exists() else ""
        return [int(p) for p in text.split()] if text.endswith("\n") else None

    found: list[int] = await eventually(written, timeout=60)
    return found


async def _all_gone(pids: list[int]) -> bool:
    return all(gone(pid) for pid in pids)


async def _kill_mid_command(
    store_url: str, marks: Path, tmp_path: Path, retry: RetryPolicy
) -> tuple[Any, Any, float]:
    """Create the job, SIGKILL the first worker mid-command, let a second one take over;
    the run and its attempts when it settled, and how long the group outlived the
    worker (seconds)."""
    async with await cronwheel.connect(store_url) as cw:
        job = await cw.create(
            name="dump",
            schedule={"kind": "immediate"},
            action={
                "type": "command",
                "argv": ["/bin/sh", "-c", SCRIPT],
                "env": {"MARKS": str(marks)},
            },
            retry=retry.to_dict(),
        )
        with cronwheel_proc(*WORKER, "--db", store_url, log=tmp_path / "a.log") as first:
            pids = await _pids(marks, 1)
            assert not await _all_gone(pids)
            first.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            first.wait(timeout=30)
            await eventually(lambda: _all_gone(pids), timeout=LEASE)
            outlived = time.monotonic() - killed_at
        with cronwheel_proc(*WORKER, "--db", store_url, log=tmp_path / "b.log"):

            async def settled() -> Any:
                [run] = await cw.runs(job.id)
                return run if run.state in (RunState.SUCCEEDED, RunState.DEAD) else None

            run = await eventually(settled, timeout=90)
        attempts = await cw.attempts(run.id)
    return run, attempts, outlived


async def test_a_killed_workers_command_group_is_stopped_and_its_run_run_again(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    retry = RetryPolicy(max_attempts=3, initial_delay=0.05, max_delay=0.05)
    run, attempts, outlived = await _kill_mid_command(store_url, marks, tmp_path, retry)
    assert outlived < LEASE  # stopped before its lease expired: no two copies at once
    assert run.state is RunState.SUCCEEDED
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST, AttemptOutcome.SUCCEEDED]
    assert attempts[0].worker_id != attempts[1].worker_id


async def test_a_killed_workers_command_on_its_last_attempt_ends_dead(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    retry = RetryPolicy(max_attempts=1)
    run, attempts, outlived = await _kill_mid_command(store_url, marks, tmp_path, retry)
    assert outlived < LEASE
    assert run.state is RunState.DEAD
    assert [a.outcome for a in attempts] == [AttemptOutcome.LOST]
    assert not (marks / "2").exists()  # never started again
