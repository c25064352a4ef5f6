"""Issue 26 item 3 with real processes: a worker holds runs claimed ahead of their start
(their instant, a free slot); SIGKILLed, it must not have them charged attempts they
never made. Before: ``retry.max_attempts: 1``, concurrency 2, ten runs, a SIGKILL, and
all ten dead ("lease expired on its last attempt"), eight of which never executed. The
eight are recorded lost without a start (the store cannot tell them from runs begun
whose start was not stored yet), uncharged: each runs its one attempt elsewhere."""

from __future__ import annotations

import signal
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import cronwheel
from cronwheel.core.model import AttemptOutcome, RetryPolicy, Run, RunState
from cronwheel.store.conformance.factories import make_job, make_run
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

RUNS = 10
WORKER = ["worker", "--app", "tests.e2e.app:worker", "--lease", "2"]


def _started(marks: Path) -> dict[int, int]:
    """Run id → pid of the process that began it (handler ``held``'s marks)."""
    found = {}
    for mark in marks.iterdir():
        run_id, _attempt, what, pid = mark.name.split("-")
        if what == "started":
            found[int(run_id)] = int(pid)
    return found


async def test_runs_claimed_ahead_and_not_begun_are_not_charged_when_their_worker_dies(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    async with await cronwheel.connect(store_url) as cw:
        job = replace(
            make_job(action={"type": "handler", "name": "held"}, retry=RetryPolicy(max_attempts=1)),
            next_fire_at=None,
            created_at=datetime.now(UTC),
        )
        # Due in 1.5 s: within the worker's prefetch window, so it claims them ahead; with
        # two slots, two begin at the instant and the others wait for a slot.
        instant = datetime.now(UTC) + timedelta(seconds=1.5)
        await cw.store.create_jobs(
            [job], [make_run(job, instant + timedelta(microseconds=i)) for i in range(RUNS)]
        )
        hold = {**env, "CRONWHEEL_TEST_HOLD": "60"}
        first_args = [*WORKER, "--db", store_url, "--concurrency", "2"]
        with cronwheel_proc(*first_args, env=hold, log=tmp_path / "first.log") as first:

            async def two_begun() -> bool:
                # Begun, and their starts stored (the worker stores them beside the
                # action: a worker killed in between leaves runs that count as not begun).
                begun = _started(marks)
                runs = [await cw.run(run_id) for run_id in begun]
                return len(begun) >= 2 and all(r.started_at is not None for r in runs)

            await eventually(two_begun, timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait(timeout=30)
        begun = _started(marks)
        assert set(begun.values()) == {first.pid} and len(begun) == 2, begun
        # Another worker (its maintenance rescues the dead worker's leases) takes the rest.
        second_args = [*WORKER, "--db", store_url, "--concurrency", "10"]
        with cronwheel_proc(*second_args, env=env, log=tmp_path / "second.log"):

            async def all_finished() -> list[Run] | None:
                runs = await cw.runs(job.id, limit=RUNS + 1)
                finished = all(r.state in (RunState.SUCCEEDED, RunState.DEAD) for r in runs)
                return runs if len(runs) == RUNS and finished else None

            runs = await eventually(all_finished, timeout=90)
        for run in runs:
            attempts = await cw.attempts(run.id)
            if run.id in begun:
                # It began under the dead worker: its one allowed attempt was made.
                assert run.state is RunState.DEAD, run
                assert [a.outcome for a in attempts] == [AttemptOutcome.LOST]
                assert attempts[0].started_at is not None
                assert attempts[0].started_at >= instant
            else:
                # Never begun under the dead worker: no attempt was charged, and its one
                # allowed attempt ran under the second worker. If the dead worker had
                # claimed it (ahead), its start was not stored, which a worker that began
                # it and had yet to store its start leaves too: that claim is recorded
                # lost, without a start, uncharged, and never made again under its
                # number ("Duplicates under overload", decision 0037).
                assert run.state is RunState.SUCCEEDED, (run, attempts)
                *lost, won = attempts
                assert won.outcome is AttemptOutcome.SUCCEEDED, attempts
                assert f"-{first.pid}-" not in (won.worker_id or "")
                assert (run.attempt, run.max_attempts) == (1 + len(lost), 1 + len(lost))
                for a in lost:
                    assert (a.outcome, a.started_at) == (AttemptOutcome.LOST, None), attempts
                    assert f"-{first.pid}-" in (a.worker_id or "")
