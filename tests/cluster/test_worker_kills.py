"""Runs (5,000 with CRONWHEEL_CLUSTER_FULL=1, 2,000 otherwise) while a worker is
SIGKILLed at random moments (ten times, five otherwise): every run ends succeeded, and
every duplicate execution is the execution of a lost attempt (I3, I4)."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

import cronwheel
from tests.cluster.conftest import Cluster, all_runs, check_history, executions, quiet, scale
from tests.engine.helpers import eventually

# It asserts no duration and shares nothing (its own database; it kills only its own
# workers): it runs in the parallel phase, beside other tests, where a loaded machine
# only makes it slower (decision 0038).
pytestmark = pytest.mark.beside_others

RUNS = scale(2_000, 5_000)
KILLS = scale(5, 10)
"""Each kill waits for the restarted victim's first execution, then a random moment of
its working life: about 3 s a kill here, and the runs outlast the kills."""
SEED = 20_240_605
LEASE = 2.0
CONCURRENCY = 5
HANDLER_SECONDS = 0.1
"""Long enough that a kill always finds runs executing (and the kills fall within the
work), short enough for the 5,000 to take about 45 s on three workers (2,000: 18 s)."""


@pytest.mark.timeout(300)
async def test_a_worker_killed_again_and_again_loses_nothing(
    cw: cronwheel.JobService, cluster: Cluster
) -> None:
    rng = random.Random(SEED)
    steady = [cluster.worker(f"steady-{i}", lease=LEASE, concurrency=CONCURRENCY) for i in range(2)]
    victim = cluster.worker("victim-0", lease=LEASE, concurrency=CONCURRENCY)
    await cw.create_many(
        [
            {
                "name": f"run-{i}",
                "schedule": {"kind": "immediate"},
                "action": {"type": "handler", "name": "noop"},
                "payload": {"seconds": HANDLER_SECONDS},
                # A run lost twice to the victim must not be taken for a poison run (dead
                # after its last attempt): this test is about crashes, not retry budgets.
                "retry": {"max_attempts": 50},
            }
            for i in range(RUNS)
        ]
    )
    started = time.monotonic()
    kill_times: list[float] = []
    for k in range(KILLS):

        async def executing(pid: int = victim.pid) -> bool:  # the victim has work in hand
            return (cluster.executions / f"{pid}.log").exists()  # made at its first execution

        await eventually(executing, timeout=60)
        await asyncio.sleep(rng.uniform(0.0, 1.5))  # a random moment of its working life
        assert victim.alive, victim.output()
        victim.kill()
        kill_times.append(time.monotonic() - started)
        victim = cluster.worker(f"victim-{k + 1}", lease=LEASE, concurrency=CONCURRENCY)

    await eventually(lambda: quiet(cw.store), timeout=180)
    finished = time.monotonic() - started
    assert all(w.alive for w in [*steady, victim]), "a worker died on its own"
    runs = await all_runs(cw.store)
    assert len(runs) == RUNS
    history = await check_history(cw.store, runs, executions(cluster.executions))
    print(
        f"\nworker kills: {KILLS} SIGKILLs at {', '.join(f'{t:.1f}' for t in kill_times)} s;"
        f" {history.runs} runs all succeeded in {finished:.1f} s; {history.executions}"
        f" executions, {history.duplicates} duplicates, each with its lost attempt;"
        f" {history.lost} lost attempts in all (lease {LEASE:g} s)"
    )
    assert history.lost > 0, "no kill ever hit a claimed run: the test proved nothing"
