"""``cronwheel dev --demo`` and a per-second cron job, for real, on real time."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import cronwheel
from cronwheel.maintenance import Maintenance
from cronwheel.model import RunState
from cronwheel.runtime import serve
from cronwheel.scheduler import Scheduler
from cronwheel.worker import Worker, WorkerConfig
from tests.e2e.procs import REPO


def test_dev_demo_shows_runs_succeeding_and_one_dead_lettered(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cronwheel",
            "dev",
            "--demo",
            "--db",
            f"sqlite:///{tmp_path / 'dev.db'}",
            "--duration",
            "12",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert "demo: 4 example jobs created" in out
    for line in (
        "demo-once succeeded",
        "demo-every-5s succeeded",
        "demo-webhook succeeded",
        "demo-flaky dead",
    ):
        assert line in out, out
    assert "stopped" in out


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
