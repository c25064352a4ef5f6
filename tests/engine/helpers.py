"""Helpers for engine tests that run real services on real time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.core.model import Job, NewRun, RetryPolicy, Run
from cronwheel.engine.worker import Worker
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_job, make_run


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """Poll ``check`` until it returns something truthy; fail after a generous timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s (last: {result!r})")
        await asyncio.sleep(0.02)


async def run_states(store: Store, job_id: str) -> list[str]:
    return [r.state.value for r in await store.list_runs("default", job_id=job_id)]


async def one_run(store: Store, job_id: str) -> Run:
    [run] = await store.list_runs("default", job_id=job_id)
    return run


async def job_with_run(
    store: Store, *, due_in: float = 0.0, action: dict[str, Any] | None = None, **job_kw: Any
) -> tuple[Job, NewRun]:
    """A handler job (``noop`` unless told) with one pending run due ``due_in`` s from now."""
    job_kw.setdefault("retry", RetryPolicy(max_attempts=3, initial_delay=0.05, max_delay=0.05))
    job = make_job(action=action or {"type": "handler", "name": "noop"}, **job_kw)
    job = replace(job, next_fire_at=None)
    due = datetime.now(UTC) + timedelta(seconds=due_in)
    run = make_run(job, due)
    await store.create_jobs([job], [run])
    return job, run


@contextlib.asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    """Run a worker in the background for the duration of the block, then stop it."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield worker
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)
