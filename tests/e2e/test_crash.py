"""I4 with real processes: a worker SIGKILLed mid-run loses nothing."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import cronwheel
from cronwheel.model import AttemptOutcome, RunState
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

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
