"""A per-second cron job, for real, on real time: 30 seconds on each store (its own file,
so that the other `cronwheel dev` tests run beside it: decision 0038)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import timedelta

import pytest

import cronwheel
from cronwheel.core.model import RunState
from cronwheel.engine.maintenance import Maintenance
from cronwheel.engine.runtime import serve
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.worker import Worker, WorkerConfig


@pytest.mark.both_stores  # the stores differ here
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
