"""A node whose clock runs an hour ahead rescues no lease that is alive by the store's
clock: maintenance follows the store's clock, like the scheduler and the worker (I3).

In-process, not a child process: the clock skew is injected as the node's clock, which a
``cronwheel`` command line cannot be given."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

import cronwheel
from cronwheel.core.clock import SystemClock
from cronwheel.core.model import RunState
from cronwheel.engine.maintenance import MAINTENANCE_LEASE, Maintenance, MaintenanceConfig
from tests.engine.helpers import eventually

# In-process, its own database, nothing timed: it runs in the parallel phase (decision 0038).
pytestmark = pytest.mark.beside_others


async def test_a_node_an_hour_ahead_rescues_no_live_lease(cw: cronwheel.JobService) -> None:
    store = cw.store
    noop = {"type": "handler", "name": "noop"}
    await cw.create_many([{"name": "held", "schedule": {"kind": "immediate"}, "action": noop}])
    now = await store.now()
    [claimed] = await store.claim_runs(
        "a-live-worker", ["default"], limit=1, now=now, prefetch_until=now, lease_seconds=60
    )
    ahead = SystemClock(offset=timedelta(hours=1))
    maintenance = Maintenance(store, clock=ahead, config=MaintenanceConfig(interval_seconds=0.05))
    stop = asyncio.Event()
    task = asyncio.create_task(maintenance.run(stop))
    renewals: set[datetime] = set()

    async def passes_done() -> bool:  # each renewal of its lease is followed by a pass
        renewals.update(
            lease.expires_at
            for lease in await store.list_shard_leases()
            if lease.shard == MAINTENANCE_LEASE
            and lease.holder == maintenance.holder
            and lease.expires_at is not None
        )
        return len(renewals) >= 3

    try:
        await eventually(passes_done, timeout=30)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=30)
    run = await cw.run(claimed.run.id)
    assert (run.state, run.fence) == (RunState.RUNNING, claimed.run.fence)
    assert await cw.attempts(run.id) == []
