"""A worker is in the registry from its start, not from its first heartbeat: the API's
`no_live_worker` notice must not accuse a worker that has just started."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store.base import Store
from tests.engine.helpers import eventually


async def test_a_worker_registers_its_pools_when_it_starts(store: Store) -> None:
    # A heartbeat every 100 s: only the registration at start can be seen within the test.
    config = WorkerConfig(pools={"email": 1}, heartbeat_seconds=100, lease_seconds=300)
    worker = Worker(store, config, webhook_secret=b"s")
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:

        async def served() -> set[str]:
            since = worker.clock.now() - timedelta(seconds=60)
            return await store.served_pools("any-tenant", seen_since=since)

        assert await eventually(served, timeout=30) == {"email"}
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
    assert await store.served_pools("any-tenant", seen_since=worker.clock.now()) == set()
