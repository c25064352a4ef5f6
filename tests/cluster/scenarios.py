"""A worker that goes dark past its lease and comes back: the scenario the freeze and the
network-partition tests share (I3: a worker that lost its lease cannot change the run)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import cronwheel
from cronwheel.core.model import AttemptOutcome, RunState
from tests.cluster.conftest import Cluster, Proc, executions, fenced_out
from tests.engine.helpers import eventually

RUNS = 4
LEASE = 4.0
"""The workers' lease TTL (they heartbeat every second)."""


@dataclass(frozen=True)
class DarkTimes:
    rescued: float
    """From going dark until the last of its runs was rescued (its lease expired)."""
    finished: float
    """From going dark until another worker had finished every one of its runs."""
    fenced: float
    """From coming back until it had been refused on every run it held."""


async def goes_dark_and_is_fenced_out(
    cw: cronwheel.JobService,
    cluster: Cluster,
    dark: Proc,
    go_dark: Callable[[], Awaitable[None]],
    come_back: Callable[[], Awaitable[None]],
    gate: Path,
) -> DarkTimes:
    """``dark`` (the only worker yet) starts RUNS runs whose first attempt waits for
    ``gate``; it goes dark; another worker must finish them once the leases expire; the
    gate opens, ``dark`` comes back, reports late, and must be refused every time,
    leaving each run's history as [lost by ``dark``, succeeded by the other]."""
    gated = {"type": "handler", "name": "gated"}
    jobs = await cw.create_many(
        [
            {
                "name": f"gated-{i}",
                "schedule": {"kind": "immediate"},
                "action": gated,
                "payload": {"gate": str(gate)},
            }
            for i in range(RUNS)
        ]
    )

    async def all_started_by_dark() -> bool:
        return sum(e.pid == dark.pid for e in executions(cluster.executions)) == RUNS

    await eventually(all_started_by_dark, timeout=60)
    run_ids = [r.id for j in jobs for r in await cw.runs(j.id)]
    assert len(run_ids) == RUNS

    dark_at, dark_wall = time.monotonic(), time.time()
    await go_dark()
    other = cluster.worker("other", lease=LEASE, concurrency=RUNS)

    async def all_succeeded() -> bool:
        states = [(await cw.run(r)).state for r in run_ids]
        return all(state is RunState.SUCCEEDED for state in states)

    await eventually(all_succeeded, timeout=90)
    finished = time.monotonic() - dark_at
    assert dark.alive
    # How long after going dark each lease was found expired, by the rescue's own record
    # (store clock; the test's clock is the same machine's).
    rescued_at = [
        a.finished_at.timestamp()
        for r in run_ids
        for a in await cw.attempts(r)
        if a.outcome is AttemptOutcome.LOST
    ]
    rescued = max(rescued_at) - dark_wall
    # The goal is about one lease TTL (plus a maintenance pass): twice the TTL leaves room
    # for a loaded machine, and still fails if rescue waits for anything longer-lived.
    assert rescued <= 2 * LEASE, f"rescued {rescued:.1f} s after going dark (lease {LEASE} s)"

    await asyncio.to_thread(gate.touch)  # its handlers finish the moment it runs again
    back_at = time.monotonic()
    await come_back()

    async def refused_everywhere() -> bool:
        return fenced_out(dark, run_ids) == set(run_ids)

    await eventually(refused_everywhere, timeout=120)
    fenced = time.monotonic() - back_at

    for run_id in run_ids:
        run = await cw.run(run_id)
        attempts = await cw.attempts(run_id)
        assert (run.state, run.attempt) == (RunState.SUCCEEDED, 2)
        assert [(a.attempt, a.outcome) for a in attempts] == [
            (1, AttemptOutcome.LOST),
            (2, AttemptOutcome.SUCCEEDED),
        ], attempts
        lost, won = attempts
        assert dark.owns(lost.worker_id) and other.owns(won.worker_id), attempts
        assert lost.error_class == "LeaseExpired"
        ran = [(e.attempt, e.pid) for e in executions(cluster.executions) if e.run_id == run_id]
        assert sorted(ran) == [(1, dark.pid), (2, other.pid)]

    # Back in the game: with the other worker gone, the one that was dark serves again.
    other.kill()
    [job] = await cw.create_many(
        [
            {
                "name": "after",
                "schedule": {"kind": "immediate"},
                "action": {"type": "handler", "name": "noop"},
            }
        ]
    )

    async def served_by_dark() -> bool:
        [run] = await cw.runs(job.id)
        if run.state is not RunState.SUCCEEDED:
            return False
        [attempt] = await cw.attempts(run.id)
        return dark.owns(attempt.worker_id)

    await eventually(served_by_dark, timeout=60)
    return DarkTimes(rescued=rescued, finished=finished, fenced=fenced)
