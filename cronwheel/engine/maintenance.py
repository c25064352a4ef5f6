"""Maintenance: rescue runs whose worker vanished, archive finished runs into history
and forget old history, and keep the live tables vacuumed (PostgreSQL, decision 0032).

Rescue is what keeps I4: a worker killed mid-run leaves its runs ``running`` with a lease
that stops being renewed; once the lease expires, the next pass records a ``lost``
attempt and makes the run claimable again (or dead, if that was its last attempt or its
job is at-most-once: a run whose worker vanished may have started, and such a run never
starts twice). A run claimed ahead whose start was not stored is charged nothing: an
at-most-once one never began and is only unclaimed (no attempt); any other may have
begun, so its attempt is recorded lost, uncharged, never to be made again under its
number (decision 0037, "Duplicates under overload").
Several maintenance passes may run at once: each run is rescued exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from cronwheel.core.clock import Clock, SystemClock, sync_to
from cronwheel.core.model import MAINTENANCE_LEASE, new_id
from cronwheel.core.records import RescueResult, Vacuum
from cronwheel.engine._aio import sleep_or_stop
from cronwheel.engine._outage import Outage
from cronwheel.observability import metrics
from cronwheel.store.base import (
    Housekeeping,
    Leases,
    Outbox,
    Queue,
    Registry,
    RunControl,
    StoreClock,
)

log = logging.getLogger("cronwheel.maintenance")


class MaintenanceStore(
    StoreClock, Queue, Leases, Registry, Housekeeping, Outbox, RunControl, Protocol
):
    """What maintenance needs of a store: the rescue, the housekeeping, the outbox's
    retention, pipeline advances, and its own lease."""


CLOCK_SYNC_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class MaintenanceConfig:
    interval_seconds: float = 1.0
    rescue_batch: int = 1000
    retention_days: float | None = 30.0
    """Finished runs older than this are deleted with their attempts; None keeps all."""
    retention_batch: int = 10_000
    archive: bool = True
    """Move finished runs out of the live tables into history (PostgreSQL; decision 0032).
    Off, finished runs stay in ``runs`` until retention deletes them."""
    archive_settle_seconds: float = 10.0
    """How long a run stays in the live tables after it finished: more than the
    scheduler's lead, and time for the reads that follow a completion."""
    history_partition_seconds: float = 86_400.0
    """The span of each history partition: retention drops whole partitions, so a run is
    forgotten up to this long after the retention passed."""
    history_partitions_ahead: int = 3
    """Partitions created ahead of the current one."""
    archive_batch: int = 5_000
    """Runs moved by one statement; a pass moves up to ``archive_batches_per_pass``."""
    archive_batches_per_pass: int = 10
    vacuum: bool = True
    """Vacuum ``runs`` and ``attempts`` when their dead tuples pass the threshold below
    (PostgreSQL; decision 0032): for servers whose autovacuum is off or too slow. Where
    autovacuum keeps up, the threshold is never reached and a pass only reads the
    tables' statistics."""
    vacuum_min_dead_tuples: int = 10_000
    vacuum_dead_fraction: float = 0.2
    """A table is vacuumed when its dead tuples pass ``max(vacuum_min_dead_tuples,
    vacuum_dead_fraction * its live tuples)``."""


@dataclass(slots=True)
class MaintenanceResult:
    retried: list[int] = field(default_factory=list)
    dead: list[int] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    unstarted: list[int] = field(default_factory=list)
    """Runs claimed ahead that their worker never started: claimable again, charged
    nothing (a cancelled one is in ``cancelled``)."""
    deleted: int = 0
    archived: int = 0
    """Finished runs moved into history (PostgreSQL)."""
    notifications_deleted: int = 0
    """Delivered and dead notifications forgotten, by the same retention as runs."""
    pipelines_advanced: int = 0
    """Pipeline runs moved on after a task run ended other than by a worker's completion
    (a rescue, a cancel): decision 0025."""
    vacuumed: list[Vacuum] = field(default_factory=list)
    """Live tables found past their dead-tuple threshold, vacuumed or skipped (PostgreSQL)."""


class Maintenance:
    def __init__(
        self,
        store: MaintenanceStore,
        *,
        clock: Clock | None = None,
        config: MaintenanceConfig | None = None,
        holder: str | None = None,
    ) -> None:
        self.holder = holder or f"maintenance-{os.getpid()}-{new_id()[-6:]}"
        self.store = store
        self.clock = clock or SystemClock()
        self.config = config or MaintenanceConfig()
        self._vacuum_warned: set[tuple[str, str]] = set()

    async def run_once(self, stop: asyncio.Event | None = None) -> MaintenanceResult:
        """One pass: every expired lease rescued, settled runs archived (PostgreSQL), one
        batch of old history deleted, then the live tables vacuumed if their dead tuples
        passed the threshold (PostgreSQL): after the archive's and retention's deletes,
        which leave most of them.

        Once ``stop`` is set the pass ends after the statement in progress: a process
        told to stop must not wait for a backlog's archive or a vacuum (each of which the
        next process's pass does as well), and every step is its own transaction."""
        result = await self._rescue_all(
            lambda: self.store.rescue_expired(now=self.clock.now(), limit=self.config.rescue_batch),
            stop,
        )
        if not _stopping(stop):
            await self._tidy(result, stop)
        self._log_rescues(result)
        return result

    async def _tidy(self, result: MaintenanceResult, stop: asyncio.Event | None) -> None:
        """The pass after its rescues: pipelines, archive, retention, vacuum."""
        result.pipelines_advanced = await self.store.advance_pipelines(now=self.clock.now())
        if self.config.archive:
            result.archived = await self._archive(stop)
        if self.config.retention_days is not None and not _stopping(stop):
            before = self.clock.now() - timedelta(days=self.config.retention_days)
            result.deleted = await self.store.delete_history(
                before=before, limit=self.config.retention_batch
            )
            result.notifications_deleted = await self.store.delete_notifications(
                before=before, limit=self.config.retention_batch
            )
        if self.config.vacuum and not _stopping(stop):
            result.vacuumed = await self._vacuum()

    def _log_rescues(self, result: MaintenanceResult) -> None:
        if result.retried or result.cancelled or result.unstarted:
            # A lease expires only when its worker died, froze or lost the store: worth a
            # line, and rare enough for one per pass.
            log.info(
                "rescued %d runs whose lease expired (%d claimable again after a lost"
                " attempt, %d never started and claimable again at no cost, %d cancelled)",
                len(result.retried) + len(result.unstarted) + len(result.cancelled),
                len(result.retried),
                len(result.unstarted),
                len(result.cancelled),
            )
        for run_id in result.dead:
            log.warning(
                "run %s: lease expired on its last attempt (or it is at-most-once);"
                " moved to the dead-letter queue",
                run_id,
            )

    async def _archive(self, stop: asyncio.Event | None = None) -> int:
        """Batches of settled runs into history, until one comes back short (or the
        pass's share of batches is spent: rescues must not wait behind a backlog; or the
        process is stopping)."""
        moved = 0
        for _ in range(self.config.archive_batches_per_pass):
            if _stopping(stop):
                break
            batch = await self.store.archive_runs(
                now=self.clock.now(),
                settle_seconds=self.config.archive_settle_seconds,
                partition_seconds=self.config.history_partition_seconds,
                partitions_ahead=self.config.history_partitions_ahead,
                limit=self.config.archive_batch,
            )
            moved += batch
            if batch < self.config.archive_batch:
                break
        return moved

    async def _vacuum(self) -> list[Vacuum]:
        found = await self.store.vacuum_live_tables(
            min_dead_tuples=self.config.vacuum_min_dead_tuples,
            dead_fraction=self.config.vacuum_dead_fraction,
        )
        for table in found:
            if table.skipped is None:
                log.info(
                    "vacuumed %s: %d dead tuples beside %d live, in %.2f s",
                    table.table,
                    table.dead_tuples,
                    table.live_tuples,
                    table.seconds,
                )
            elif table.busy:
                log.debug("vacuum of %s skipped: %s", table.table, table.skipped)
            elif (table.table, table.skipped) not in self._vacuum_warned:
                # Once per process: the server refused (e.g. the role does not own the
                # table), and will refuse every pass until an operator acts.
                self._vacuum_warned.add((table.table, table.skipped))
                log.warning(
                    "could not vacuum %s (%d dead tuples): %s. Vacuum it another way"
                    " (autovacuum, or a role that owns it), or set vacuum off",
                    table.table,
                    table.dead_tuples,
                    table.skipped,
                )
        return found

    async def rescue_dead_owners(self, owners: list[str]) -> MaintenanceResult:
        """Rescue at once every run still held by ``owners``, workers the caller proved
        dead (``cronwheel dev`` holds the lock of its SQLite file that they held): their
        runs need not wait out their leases. The dead workers' records are forgotten."""
        if not owners:
            return MaintenanceResult()
        result = await self._rescue_all(
            lambda: self.store.rescue_runs_of_dead_owner(
                owners, now=self.clock.now(), limit=self.config.rescue_batch
            )
        )
        for owner in owners:
            with contextlib.suppress(Exception):  # a stale record only ages out later
                await self.store.remove_worker(owner)
        return result

    async def run(self, stop: asyncio.Event) -> None:
        """A pass every ``interval_seconds`` while this process holds the maintenance
        lease: many processes run the service, one at a time does the work, and another
        takes over within the lease TTL when it dies.

        The lease is short (three passes): while its holder is dead or frozen nobody
        rescues, and a worker's runs must be claimable again about one worker lease TTL
        after it died, also when it held this lease (with a 10 s maintenance lease, a
        frozen worker's 3 s leases were rescued after 10.7 s). A pass that outlives the
        lease lets a second process in, which is harmless: each run is rescued once, and
        retention skips the rows another pass has locked.

        Its clock follows the store's, like the scheduler's and the worker's: ``now``
        decides which leases have expired, and a node whose clock runs ahead must not
        rescue runs whose worker is alive and heartbeating by the store's clock."""
        outage = Outage(log, "maintenance")
        ttl = 3 * self.config.interval_seconds
        synced_at = float("-inf")
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            if loop.time() - synced_at > CLOCK_SYNC_SECONDS:
                with contextlib.suppress(Exception):  # a failed sync keeps the last offset
                    await sync_to(self.clock, self.store.now)
                    synced_at = loop.time()
            try:
                if await self.store.acquire_shards(
                    self.holder, [MAINTENANCE_LEASE], now=self.clock.now(), ttl_seconds=ttl
                ):
                    await self.run_once(stop)
            except Exception as exc:
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()
            await sleep_or_stop(stop, self.config.interval_seconds)
        with contextlib.suppress(Exception):
            await self.store.release_shards(self.holder, [MAINTENANCE_LEASE])

    async def _rescue_all(
        self, batch: Callable[[], Awaitable[RescueResult]], stop: asyncio.Event | None = None
    ) -> MaintenanceResult:
        """Call a rescue batch until one comes back short (every run it finds, rescued)
        or the process is stopping."""
        result = MaintenanceResult()
        while not _stopping(stop):
            rescued = await batch()
            result.retried += rescued.retried
            result.dead += rescued.dead
            result.cancelled += rescued.cancelled
            result.unstarted += rescued.unstarted
            # A started run's rescue records a lost attempt; an unstarted one's records
            # none. A cancelled run may be either (the result does not say): counted as
            # lost, as the rare cancel of a run claimed ahead is.
            lost = len(rescued.retried) + len(rescued.dead) + len(rescued.cancelled)
            metrics.default().attempts_lost(lost)
            metrics.default().runs_unclaimed(len(rescued.unstarted))
            if lost + len(rescued.unstarted) < self.config.rescue_batch:
                break
        return result


def _stopping(stop: asyncio.Event | None) -> bool:
    return stop is not None and stop.is_set()
