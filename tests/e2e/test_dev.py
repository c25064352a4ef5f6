"""``cronwheel dev --demo`` and a per-second cron job, for real, on real time."""

from __future__ import annotations

import asyncio
import itertools
import socket
from datetime import timedelta
from pathlib import Path

import httpx

import cronwheel
from cronwheel.maintenance import Maintenance
from cronwheel.model import RunState
from cronwheel.runtime import serve
from cronwheel.scheduler import Scheduler
from cronwheel.worker import Worker, WorkerConfig
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


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
