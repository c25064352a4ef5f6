"""What the ``cronwheel dev`` console reports: each event once, at its own time.

The events are read from the store (:meth:`Store.list_activity`), so the console tells
what the store knows, whoever did it (the process's own worker, or a ``cronwheel
worker`` beside it on the same file), and the times are the store's:

* an attempt started: a claimed run whose start (``started_at``) has come; a run claimed
  ahead of its instant has not started, and is not reported before it does;
* an attempt ended (its outcome, error and worker), with what became of its run: done,
  retried at a time, or dead;
* a run closed without an attempt (cancelled while pending, skipped, replanned);
* a job whose due runs wait because no live worker serves their pool (once per job).

Events recorded before the console started are history: :meth:`EventFeed.start` returns
the newest of them, marked as such, and the live feed never reports them again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from cronwheel.core.clock import Clock
from cronwheel.core.model import (
    DEFAULT_TENANT,
    SHARED_WORKERS,
    Attempt,
    AttemptOutcome,
    Run,
    RunState,
)
from cronwheel.core.records import Activity
from cronwheel.store.base import Store

LOOKBACK = 256
"""Attempt ids re-read behind the cursor: a PostgreSQL transaction may commit an attempt
after one with a higher id, and the console must not skip it."""
NO_ATTEMPTS = 2**62
"""A cursor past every attempt id (both stores' ids are 64-bit)."""
WAIT_NOTICE_AFTER = timedelta(seconds=2)
"""A due run is reported as waiting for a worker once it has been due this long."""
WORKER_SEEN_WITHIN = timedelta(seconds=15)
"""A worker heard of within this long serves its pools (it heartbeats every 5 s)."""


class Kind(StrEnum):
    STARTED = "started"
    ENDED = "ended"
    CLOSED = "closed"
    WAITS = "waits"
    RUNNING = "running"
    """History only: a run held by a worker when the console started."""


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened, at its own time."""

    at: datetime
    kind: Kind
    job: str
    run: Run | None = None
    attempt: Attempt | None = None
    attempt_number: int = 0
    worker: str | None = None
    pool: str | None = None
    served: tuple[str, ...] = ()
    count: int = 1
    """Runs closed together in this event (``run`` is the first)."""
    more: bool = False
    """The read was full: more runs than ``count`` may have closed together."""


class EventFeed:
    """Turns successive reads of the store's activity into events, each reported once."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        own_pools: Collection[str] = (),
        limit: int = 500,
    ) -> None:
        self.store = store
        self.clock = clock
        self.own_pools = tuple(own_pools)
        self.limit = limit
        self.started_at: datetime | None = None
        self._cursor = 0
        self._history_until = 0
        """Attempts up to this id were recorded before the start: history, not events."""
        self._attempts_seen: set[int] = set()
        self._starts_seen: set[tuple[int, int]] = set()
        self._closed_since: datetime | None = None
        self._closed_seen: set[tuple[int, datetime]] = set()
        self._waiting: set[str] = set()
        self._names: dict[tuple[str, str], str] = {}

    async def start(self, *, history: int = 10) -> list[Event]:
        """Mark now as the start: return up to ``history`` of the newest attempts before
        it and the runs in flight, as history; the live feed reports only what follows."""
        now = self.clock.now()
        self.started_at = self._closed_since = now
        # No attempts wanted here: only the latest id, and the runs in flight.
        probe = await self.store.list_activity(
            after_attempt=NO_ATTEMPTS, finished_since=now, limit=self.limit
        )
        self._cursor = self._history_until = probe.latest_attempt
        events = []
        if history > 0:
            past = await self.store.list_activity(
                after_attempt=max(0, self._cursor - history), finished_since=now, limit=history
            )
            # One recorded since the first read is a live event, not history.
            before = [a for a in past.attempts if a.id <= self._history_until]
            events = [await self._ended(a, past.runs_of_attempts) for a in before]
        for run in probe.running:
            # Started before now: history. Claimed runs still to start are live events.
            if run.started_at is not None and run.started_at < now:
                self._starts_seen.add((run.id, run.attempt))
                name = await self.name_of(run)
                events.append(
                    Event(
                        run.started_at,
                        Kind.RUNNING,
                        name,
                        run=run,
                        attempt_number=run.attempt,
                        worker=run.lease_owner,
                    )
                )
        self._closed_seen.update((r.id, r.finished_at) for r in probe.closed if r.finished_at)
        return sorted(events, key=lambda e: e.at)

    async def poll(self, *, check_waiting: bool = False) -> list[Event]:
        """The events recorded since the last poll, oldest first. With ``check_waiting``,
        also the jobs whose due runs no live worker serves (each once until served)."""
        if self.started_at is None:
            await self.start(history=0)
        now = self.clock.now()
        activity = await self.store.list_activity(
            after_attempt=max(0, self._cursor - LOOKBACK),
            finished_since=self._closed_since or now,
            waiting_before=now - WAIT_NOTICE_AFTER if check_waiting else None,
            limit=self.limit,
        )
        events = await self._from_attempts(activity)
        events += await self._from_running(activity.running, now)
        events += await self._from_closed(activity.closed, now)
        if check_waiting:
            events += await self._from_waiting(activity.waiting, now)
        return sorted(events, key=lambda e: e.at)

    async def _from_attempts(self, activity: Activity) -> list[Event]:
        events: list[Event] = []
        for attempt in activity.attempts:
            if (
                attempt.id in self._attempts_seen
                or attempt.id <= self._cursor - LOOKBACK
                or attempt.id <= self._history_until
            ):
                continue
            self._attempts_seen.add(attempt.id)
            key = (attempt.run_id, attempt.attempt)
            run = activity.runs_of_attempts.get(attempt.run_id)
            if key not in self._starts_seen and attempt.started_at is not None and run:
                # It started and ended between two polls: its start is still an event.
                name = await self.name_of(run)
                events.append(
                    Event(
                        attempt.started_at,
                        Kind.STARTED,
                        name,
                        run=run,
                        attempt_number=attempt.attempt,
                        worker=attempt.worker_id,
                    )
                )
            self._starts_seen.discard(key)
            events.append(await self._ended(attempt, activity.runs_of_attempts))
        if activity.attempts:
            self._cursor = max(self._cursor, max(a.id for a in activity.attempts))
        floor = self._cursor - LOOKBACK
        self._attempts_seen = {i for i in self._attempts_seen if i > floor}
        return events

    async def _from_running(self, running: list[Run], now: datetime) -> list[Event]:
        events = []
        for run in running:
            key = (run.id, run.attempt)
            # Claimed ahead of its instant: not started yet, so nothing to report.
            if key in self._starts_seen or run.started_at is None or run.started_at > now:
                continue
            self._starts_seen.add(key)
            events.append(
                Event(
                    run.started_at,
                    Kind.STARTED,
                    await self.name_of(run),
                    run=run,
                    attempt_number=run.attempt,
                    worker=run.lease_owner,
                )
            )
        return events

    async def _from_closed(self, closed: list[Run], now: datetime) -> list[Event]:
        # Runs closed together (a cancelled job's pending runs, a pause's skipped ones)
        # make one event: one line, not a thousand.
        groups: dict[tuple[str, str, str, str | None, datetime], list[Run]] = {}
        for run in closed:
            if run.finished_at is None or (run.id, run.finished_at) in self._closed_seen:
                continue
            self._closed_seen.add((run.id, run.finished_at))
            key = (run.tenant_id, run.job_id, run.state.value, run.reason, run.finished_at)
            groups.setdefault(key, []).append(run)
        full = len(closed) >= self.limit  # there may be more than this read could hold
        events = []
        for (*_, finished_at), runs in groups.items():
            name = await self.name_of(runs[0])
            more = full and len(runs) > 1
            events.append(
                Event(finished_at, Kind.CLOSED, name, run=runs[0], count=len(runs), more=more)
            )
        # Keep a short window behind: a run closed in a transaction that committed late
        # still has a finished_at inside it.
        horizon = now - timedelta(seconds=30)
        if self._closed_since is not None and horizon > self._closed_since:
            self._closed_since = horizon
            self._closed_seen = {k for k in self._closed_seen if k[1] >= horizon}
        return events

    async def _from_waiting(self, waiting: list[Run], now: datetime) -> list[Event]:
        served = set(self.own_pools)
        # In-process workers register as shared; remote ones under their tenant.
        for tenant in (SHARED_WORKERS, DEFAULT_TENANT):
            for worker in await self.store.list_workers(
                tenant, seen_since=now - WORKER_SEEN_WITHIN
            ):
                served.update(worker.pools)
        events = []
        still = set()
        for run in waiting:
            if run.pool in served:
                continue
            still.add(run.job_id)
            if run.job_id in self._waiting:
                continue
            events.append(
                Event(
                    now,
                    Kind.WAITS,
                    await self.name_of(run),
                    run=run,
                    pool=run.pool,
                    served=tuple(sorted(served)),
                )
            )
        # A job served again (or with nothing due) is reported anew if it waits again.
        self._waiting = still
        return events

    async def _ended(self, attempt: Attempt, runs: Mapping[int, Run]) -> Event:
        run = runs.get(attempt.run_id)
        name = await self.name_of(run) if run else attempt.job_id
        return Event(
            attempt.finished_at,
            Kind.ENDED,
            name,
            run=run,
            attempt=attempt,
            attempt_number=attempt.attempt,
            worker=attempt.worker_id,
        )

    async def name_of(self, run: Run) -> str:
        key = (run.tenant_id, run.job_id)
        name = self._names.get(key)
        if name is None:
            job = await self.store.get_job(run.tenant_id, run.job_id)
            name = job.name if job else run.job_id
            self._names[key] = name
        return name


def next_step(attempt: Attempt, run: Run | None) -> str | None:
    """What became of the run after ``attempt``, as far as the store says now."""
    if run is None:
        return None
    if run.attempt > attempt.attempt:
        return "retried"
    if run.attempt != attempt.attempt:
        return None
    if run.state is RunState.PENDING and attempt.outcome is not AttemptOutcome.SUCCEEDED:
        return "retry"
    if run.state.finished and run.finished_at == attempt.finished_at:
        return run.state.value
    return None
