"""Notices: what a user should know about a job or a run that is not an error, e.g. that
no live worker serves its pool, so its runs wait. Shown in job and run answers; a job is
never refused for them (the worker may simply not be started yet)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from cronwheel.core.clock import Clock
from cronwheel.core.model import Job, JobState, Run, RunState
from cronwheel.store.base import Store

NO_LIVE_WORKER = "no_live_worker"
LIVE_WINDOW = timedelta(seconds=60)
"""A worker heard from within this window is live: the window ``GET /v1/workers`` lists."""
CACHE_SECONDS = 2.0
"""How long one tenant's set of served pools is reused: one query per tenant every 2 s,
however many jobs and runs are read."""


@dataclass(frozen=True, slots=True)
class Notice:
    code: str
    message: str


@dataclass
class Notices:
    """Works out the notices of jobs and runs, from the worker registry."""

    store: Store
    clock: Clock
    cache_seconds: float = CACHE_SECONDS
    monotonic: Callable[[], float] = time.monotonic
    _served: dict[str, tuple[float, set[str]]] = field(default_factory=dict)

    async def served_pools(self, tenant_id: str) -> set[str]:
        """The pools some live worker serves for the tenant, from a cache of a few seconds."""
        cached = self._served.get(tenant_id)
        if cached is not None and cached[0] > self.monotonic():
            return cached[1]
        since = self.clock.now() - LIVE_WINDOW
        pools = await self.store.served_pools(tenant_id, seen_since=since)
        if len(self._served) > 10_000:  # tenants come and go: never grow without bound
            self._served.clear()
        self._served[tenant_id] = (self.monotonic() + self.cache_seconds, pools)
        return pools

    async def for_job(self, job: Job) -> list[Notice]:
        """A job that will still make runs, or a completed one whose run has not finished
        yet (an immediate job's, a one-time job's), in a pool that no live worker serves.
        ``job.last_run`` must have been looked up (see :meth:`JobService.get`)."""
        waiting = job.state is JobState.ACTIVE or (
            job.state is JobState.COMPLETED and job.last_run is None
        )
        if not waiting or job.pool in await self.served_pools(job.tenant_id):
            return []
        return [_no_live_worker(job.pool, "its runs")]

    async def for_run(self, run: Run) -> list[Notice]:
        """A pending run in a pool that no live worker serves."""
        if run.state is not RunState.PENDING or run.pool in await self.served_pools(run.tenant_id):
            return []
        return [_no_live_worker(run.pool, "this run")]


def _no_live_worker(pool: str, what: str) -> Notice:
    return Notice(
        NO_LIVE_WORKER,
        f"no live worker serves pool {pool!r}; {what} wait until one does"
        f" (start one: cronwheel worker --pool {pool})",
    )
