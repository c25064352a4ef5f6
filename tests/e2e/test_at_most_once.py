"""Item 12 of issue 13 with real processes: an at-most-once run is started once, whether
its worker is stopped (SIGTERM, grace expired) or killed (SIGKILL, lease expired), and
another worker started afterwards never starts it again."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

import cronwheel
from cronwheel.core.model import (
    REASON_AT_MOST_ONCE_LOST,
    REASON_AT_MOST_ONCE_STOPPED,
    Job,
    Run,
    RunState,
)
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

WORKER = ["worker", "--app", "tests.e2e.app:worker", "--concurrency", "2"]


def _starts(marks: Path) -> list[str]:
    log = marks / "starts.log"
    return log.read_text().splitlines() if log.exists() else []


async def _create(cw: cronwheel.JobService) -> str:
    job = await cw.create(
        name="charge-card",
        schedule={"kind": "immediate"},
        action={"type": "handler", "name": "once"},
        delivery="at_most_once",
    )
    return job.id


async def _probe(cw: cronwheel.JobService) -> Job:
    """A quick job: once it has run, the worker started after the stop has been claiming."""
    job = await cw.create(
        name="probe", schedule={"kind": "immediate"}, action={"type": "handler", "name": "quick"}
    )
    return job


async def _finished(cw: cronwheel.JobService, job_id: str) -> Run | None:
    await asyncio.sleep(0)
    [run] = await cw.runs(job_id)
    return run if run.state.finished else None


async def _started(marks: Path) -> bool:
    await asyncio.sleep(0)
    return len(_starts(marks)) >= 1


async def test_sigterm_after_the_grace_period_never_starts_it_twice(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    async with await cronwheel.connect(store_url) as cw:
        job_id = await _create(cw)
        with cronwheel_proc(
            *WORKER, "--grace", "0.5", "--db", store_url, env=env, log=tmp_path / "a.log"
        ) as first:
            await eventually(lambda: _started(marks), timeout=60)
            first.send_signal(signal.SIGTERM)
            assert first.wait(timeout=30) == 0
        run = await eventually(lambda: _finished(cw, job_id), timeout=10)
        assert (run.state, run.reason, run.attempt) == (
            RunState.DEAD,
            REASON_AT_MOST_ONCE_STOPPED,
            1,
        )
        # A second worker on the same store finds nothing to start: it runs a quick job
        # to prove it is claiming, then the at-most-once run is still dead, started once.
        probe = await _probe(cw)
        with cronwheel_proc(*WORKER, "--db", store_url, env=env, log=tmp_path / "b.log"):
            await eventually(lambda: _finished(cw, probe.id), timeout=60)
        [run] = await cw.runs(job_id)
    assert run.state is RunState.DEAD
    assert len(_starts(marks)) == 1, _starts(marks)


async def test_sigkill_and_an_expired_lease_never_start_it_twice(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    short = [*WORKER, "--lease", "1", "--db", store_url]
    async with await cronwheel.connect(store_url) as cw:
        job_id = await _create(cw)
        with cronwheel_proc(*short, env=env, log=tmp_path / "a.log") as first:
            await eventually(lambda: _started(marks), timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        probe = await _probe(cw)
        with cronwheel_proc(*short, env=env, log=tmp_path / "b.log"):
            # The second worker's maintenance rescues the expired lease: dead, not retried.
            run = await eventually(lambda: _finished(cw, job_id), timeout=60)
            await eventually(lambda: _finished(cw, probe.id), timeout=60)
        [run] = await cw.runs(job_id)
    assert (run.state, run.reason) == (RunState.DEAD, REASON_AT_MOST_ONCE_LOST)
    assert len(_starts(marks)) == 1, _starts(marks)
