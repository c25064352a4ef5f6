"""The scheduler: turns due jobs into runs, tick after tick.

Each tick reads the jobs whose ``next_fire_at`` falls within its lead (the horizon,
stretched when a herd is coming: :mod:`cronwheel.core.lead`), plans their runs
(:mod:`cronwheel.core.planning`) and writes every plan of a batch in one
``materialize_runs``. Inserts are insert-if-absent and a job's advance is a
compare-and-set on the version and ``next_fire_at`` it was read with, so two schedulers
racing over the same jobs cannot double-fire (I2), even once the first one's runs have
been archived out of ``runs`` (decision 0032), and an edit or a pause that lands mid-tick
wins (I5). A job refused that way is reported stale and planned afresh at the next read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from cronwheel.core.clock import Clock, SystemClock, sync_to
from cronwheel.core.lead import Pace
from cronwheel.core.model import JobState, RunState
from cronwheel.core.planning import ScheduleCache, plan_job
from cronwheel.engine._aio import first_of, sleep_or_stop
from cronwheel.engine._outage import Outage
from cronwheel.engine.shards import ShardingConfig, ShardOwner
from cronwheel.observability import metrics as _metrics
from cronwheel.store.base import JOBS_TOPIC, Leases, Queue, Registry, StoreClock

log = logging.getLogger("cronwheel.scheduler")


class SchedulerStore(StoreClock, Queue, Leases, Registry, Protocol):
    """What the scheduler needs of a store: the queue's planning half, and its shards' leases."""


CLOCK_SYNC_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    horizon_seconds: float = 2.0
    """Runs are materialised this long before they are due, so a worker can prefetch them
    and start each at its exact instant."""
    batch_size: int = 1000
    interval_seconds: float = 0.5
    """The longest an idle scheduler sleeps between ticks (wake-ups cut it short)."""
    max_batches_per_tick: int = 100
    max_lead_seconds: float = 30.0
    """The farthest ahead a herd is materialised: when the jobs due within this window
    would take longer than the horizon to materialise, at the pace measured, the
    scheduler starts that much earlier. Equal to the horizon, it never does."""

    def __post_init__(self) -> None:
        for name in ("horizon_seconds", "interval_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive")
        if self.max_lead_seconds < self.horizon_seconds:
            raise ValueError("max_lead_seconds: must be at least horizon_seconds")
        if self.batch_size < 1 or self.max_batches_per_tick < 1:
            raise ValueError("batch_size and max_batches_per_tick: must be at least 1")


@dataclass(slots=True)
class TickResult:
    jobs: int = 0
    runs_inserted: int = 0
    runs_skipped: int = 0
    jobs_completed: int = 0
    stale_jobs: list[str] = field(default_factory=list)
    lead_seconds: float = 0.0
    """How far ahead this tick materialised (the horizon unless a herd was coming)."""


class Scheduler:
    """Materialises the runs of due jobs. Safe to run several at once on one store."""

    def __init__(
        self,
        store: SchedulerStore,
        *,
        clock: Clock | None = None,
        config: SchedulerConfig | None = None,
        sharding: ShardingConfig | None = None,
        holder: str | None = None,
        metrics: _metrics.Metrics | None = None,
    ) -> None:
        """Without ``sharding`` the scheduler serves every job (one process, or several
        racing harmlessly); with it, only the shards it leases, each write guarded by
        the shard's epoch."""
        self.store = store
        self.clock = clock or SystemClock()
        self.config = config or SchedulerConfig()
        self.owner = None if sharding is None else ShardOwner(store, self.clock, sharding, holder)
        self._schedules = ScheduleCache()
        self.metrics = metrics or _metrics.default()
        self.metrics.scheduler_started(shard_count=1 if sharding is None else sharding.shard_count)
        self.pace = Pace()
        """The measured cost per job; tests with a frozen clock set it (nothing is
        measured when no time passes)."""

    async def run_once(self, stop: asyncio.Event | None = None) -> TickResult:
        """One tick: every due job's runs materialised, batch by batch; once ``stop`` is
        set, no batch more (a herd's tick takes seconds, and a stopping scheduler hands
        its shards over instead: the next owner materialises the rest)."""
        config = self.config
        result = TickResult()
        horizon = timedelta(seconds=config.horizon_seconds)
        guard = None if self.owner is None else self.owner.guard
        if guard is not None and not guard.epochs:
            return result  # no shard of ours yet
        shards = None if guard is None else sorted(guard.epochs)
        count = 1 if guard is None else guard.shard_count
        lead = await self._lead(shards, count)
        result.lead_seconds = lead.total_seconds()
        for _ in range(config.max_batches_per_tick):
            if stop is not None and stop.is_set():
                break
            now = started = self.clock.now()
            jobs = await self.store.fetch_due_jobs(
                now + lead, limit=config.batch_size, shards=shards, shard_count=count
            )
            if not jobs:
                break
            # A job taken early for a herd gets its next occurrence only, not the lead's
            # worth of them: an every-second job must not get thirty runs at once.
            plans = [
                plan_job(
                    j, now, horizon=_reach(j.next_fire_at, now, horizon), schedules=self._schedules
                )
                for j in jobs
            ]
            written = await self.store.materialize_runs(
                [r for p in plans for r in p.runs], [p.advance for p in plans], guard=guard
            )
            self.pace.observe(len(jobs), (self.clock.now() - started).total_seconds())
            result.jobs += written.advanced
            result.runs_inserted += written.inserted
            result.stale_jobs += written.stale_jobs
            stale = set(written.stale_jobs)
            for p in plans:
                if p.advance.job_id not in stale:
                    result.runs_skipped += sum(r.state is RunState.SKIPPED for r in p.runs)
                    result.jobs_completed += p.advance.state is JobState.COMPLETED
            if len(jobs) < config.batch_size:
                break
        return result

    async def _tick(self, stop: asyncio.Event | None = None) -> None:
        """One tick, measured: its duration, lead, skips and the shards it served."""
        started = time.perf_counter()
        result = await self.run_once(stop)
        guard = None if self.owner is None else self.owner.guard
        self.metrics.scheduler_tick(
            time.perf_counter() - started,
            lead_seconds=result.lead_seconds,
            shards_owned=1 if guard is None else len(guard.epochs),
            shard_count=1 if guard is None else guard.shard_count,
        )
        # The planner skips only missed occurrences (the misfire policy).
        self.metrics.runs_skipped("misfire", result.runs_skipped)

    async def _lead(self, shards: list[int] | None, shard_count: int) -> timedelta:
        """How far ahead this tick looks: the horizon, or more if a herd is coming."""
        config = self.config
        limit = self.pace.count_limit(
            horizon=config.horizon_seconds, max_lead=config.max_lead_seconds
        )
        if limit == 0:
            return timedelta(seconds=config.horizon_seconds)
        until = self.clock.now() + timedelta(seconds=config.max_lead_seconds)
        due = await self.store.count_due_jobs(
            until, limit=limit, shards=shards, shard_count=shard_count
        )
        lead = self.pace.lead(due, horizon=config.horizon_seconds, max_lead=config.max_lead_seconds)
        return timedelta(seconds=lead)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop`` is set; sleep between ticks unless woken by a job change.
        Its clock follows the store's (measured every minute); with sharding it renews
        and rebalances its shards every ``renew_seconds`` and hands them back on stop."""
        loop = asyncio.get_running_loop()
        outage = Outage(log, "scheduler tick")
        synced_at = rebalanced_at = float("-inf")
        while not stop.is_set():
            if loop.time() - synced_at > CLOCK_SYNC_SECONDS:
                with contextlib.suppress(Exception):  # a failed sync keeps the last offset
                    await sync_to(self.clock, self.store.now)
                    synced_at = loop.time()
            try:
                if (
                    self.owner is not None
                    and loop.time() - rebalanced_at >= self.owner.config.renew_seconds
                ):
                    await self.owner.rebalance()
                    rebalanced_at = loop.time()
                await self._tick(stop)
            except Exception as exc:  # the store may be restarting: log once, back off, go on
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()
            await first_of(
                self.store.wait([JOBS_TOPIC], timeout=self.config.interval_seconds), stop.wait()
            )
        if self.owner is not None:
            with contextlib.suppress(Exception):  # a crash loses nothing either: leases expire
                await self.owner.stop()


def _reach(next_fire_at: datetime | None, now: datetime, horizon: timedelta) -> timedelta:
    """The horizon for one due job: the scheduler's, or as far as the job's next
    occurrence when the lead took it early."""
    if next_fire_at is None:
        return horizon
    return max(horizon, next_fire_at - now)
