"""Maintenance: rescue runs whose worker vanished, and forget old history.

Rescue is what keeps I4: a worker killed mid-run leaves its runs ``running`` with a lease
that stops being renewed; once the lease expires, the next pass records a ``lost``
attempt and makes the run claimable again (or dead, if that was its last attempt).
Several maintenance passes may run at once: each run is rescued exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field
from datetime import timedelta

from cronwheel._aio import sleep_or_stop
from cronwheel._outage import Outage
from cronwheel.clock import Clock, SystemClock
from cronwheel.model import new_id
from cronwheel.store.base import Store

log = logging.getLogger("cronwheel.maintenance")

MAINTENANCE_LEASE = -1
"""The shard-lease row whose holder is the one process doing maintenance."""


@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    interval_seconds: float = 1.0
    rescue_batch: int = 1000
    retention_days: float | None = 30.0
    """Finished runs older than this are deleted with their attempts; None keeps all."""
    retention_batch: int = 10_000


@dataclass(slots=True)
class MaintenanceResult:
    retried: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    deleted: int = 0


class Maintenance:
    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        config: MaintenanceConfig | None = None,
        holder: str | None = None,
    ) -> None:
        self.holder = holder or f"maintenance-{os.getpid()}-{new_id()[-6:]}"
        self.store = store
        self.clock = clock or SystemClock()
        self.config = config or MaintenanceConfig()

    async def run_once(self) -> MaintenanceResult:
        """One pass: every expired lease rescued, one batch of old history deleted."""
        result = MaintenanceResult()
        while True:
            rescued = await self.store.rescue_expired(
                now=self.clock.now(), limit=self.config.rescue_batch
            )
            result.retried += rescued.retried
            result.dead += rescued.dead
            result.cancelled += rescued.cancelled
            found = len(rescued.retried) + len(rescued.dead) + len(rescued.cancelled)
            if found < self.config.rescue_batch:
                break
        if self.config.retention_days is not None:
            before = self.clock.now() - timedelta(days=self.config.retention_days)
            result.deleted = await self.store.delete_history(
                before=before, limit=self.config.retention_batch
            )
        for run_id in result.dead:
            log.warning(
                "run %s: lease expired on its last attempt; moved to the dead-letter queue", run_id
            )
        return result

    async def run(self, stop: asyncio.Event) -> None:
        """A pass every ``interval_seconds`` while this process holds the maintenance
        lease: many processes run the service, one at a time does the work, and another
        takes over within the lease TTL when it dies."""
        outage = Outage(log, "maintenance")
        ttl = max(3 * self.config.interval_seconds, 10.0)
        while not stop.is_set():
            try:
                if await self.store.acquire_shards(
                    self.holder, [MAINTENANCE_LEASE], now=self.clock.now(), ttl_seconds=ttl
                ):
                    await self.run_once()
            except Exception as exc:
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()
            await sleep_or_stop(stop, self.config.interval_seconds)
        with contextlib.suppress(Exception):
            await self.store.release_shards(self.holder, [MAINTENANCE_LEASE])
