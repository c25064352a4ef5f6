"""A worker frozen with SIGSTOP past its lease, then thawed: another worker re-claimed
and finished its runs, and everything the frozen one says afterwards is fenced out."""

from __future__ import annotations

import pytest

import cronwheel
from tests.cluster.conftest import Cluster
from tests.cluster.scenarios import LEASE, RUNS, goes_dark_and_is_fenced_out


@pytest.mark.timeout(300)
async def test_a_frozen_worker_is_fenced_out_when_it_thaws(
    cw: cronwheel.JobService, cluster: Cluster
) -> None:
    frozen = cluster.worker("frozen", lease=LEASE, concurrency=RUNS)

    async def freeze() -> None:
        frozen.freeze()

    async def thaw() -> None:
        frozen.thaw()

    times = await goes_dark_and_is_fenced_out(
        cw, cluster, frozen, freeze, thaw, cluster.logs.parent / "gate"
    )
    print(
        f"\nworker freeze (SIGSTOP): its {RUNS} runs rescued {times.rescued:.1f} s and finished"
        f" by another worker {times.finished:.1f} s after the freeze (lease {LEASE:g} s);"
        f" thawed, it was fenced out of all of them within {times.fenced:.2f} s"
    )
