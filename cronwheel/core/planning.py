"""Planning a due job's runs: which occurrences fire, which are skipped and why.

Pure functions of (job, now): the scheduler calls :func:`plan_job` for every due job and
writes all the plans in one :meth:`~cronwheel.store.base.Store.materialize_runs`.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cronwheel.core.lifecycle import attempt_budget
from cronwheel.core.model import (
    MAX_MISFIRE_LIMIT,
    REASON_MISFIRE,
    Job,
    JobState,
    MisfireMode,
    NewRun,
    Overlap,
    RunState,
    run_key,
)
from cronwheel.core.records import JobAdvance
from cronwheel.schedule import Schedule, next_fire, schedule_from_dict

MAX_OCCURRENCES_PER_PLAN = 1000
"""How many occurrences one plan enumerates; a longer backlog continues at the next tick,
so a job that was down for a year cannot stall a tick, and is still fully recorded."""


@dataclass(frozen=True, slots=True)
class JobPlan:
    runs: list[NewRun]
    advance: JobAdvance


class ScheduleCache:
    """Parsed schedules by their dict form: a cron expression is parsed once however many
    jobs share it (a herd of jobs created together usually does), not once per job."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        self._items: OrderedDict[str, tuple[Mapping[str, Any], Schedule]] = OrderedDict()

    def get(self, job: Job) -> Schedule:
        # repr is the key (C speed for JSON values); the equality check makes a look-alike
        # value (another type with the same repr) a miss, never a wrong hit.
        key = repr(job.schedule)
        found = self._items.get(key)
        if found is not None and found[0] == job.schedule:
            return found[1]
        schedule = schedule_from_dict(job.schedule)
        self._items[key] = (job.schedule, schedule)
        if len(self._items) > self._size:
            self._items.popitem(last=False)
        return schedule


def jitter_offset(job_id: str, scheduled_for: datetime, window: float) -> timedelta:
    """A stable offset in ``[0, window)`` for one occurrence: the same occurrence always
    gets the same offset, so a retried tick does not move it."""
    if window <= 0:
        return timedelta(0)
    digest = hashlib.blake2b(f"{job_id}@{scheduled_for.isoformat()}".encode(), digest_size=8)
    fraction = int.from_bytes(digest.digest(), "big") / 2**64
    return timedelta(seconds=fraction * window)


def plan_job(
    job: Job,
    now: datetime,
    *,
    horizon: timedelta,
    schedules: ScheduleCache | None = None,
    limit: int = MAX_OCCURRENCES_PER_PLAN,
) -> JobPlan:
    """The runs of ``job`` due by ``now + horizon`` and the job's next ``next_fire_at``.

    Occurrences older than the job's catch-up window are misfires, handled by its
    misfire policy; every skipped occurrence is still a run, in state ``skipped``.
    """
    schedule = (schedules or ScheduleCache(1)).get(job)
    occurrences, following = _occurrences(job, schedule, now + horizon, limit)
    cutoff = now - timedelta(seconds=job.catchup_seconds)
    missed = [t for t in occurrences if t < cutoff]
    later = _missed_later(job, schedule, following, cutoff)
    fire_now, skipped = _misfire(job, missed, later)
    # Backfilled occurrences run one at a time, oldest first, as if there had been no
    # downtime (the queue overlap policy); fire_once and fire_last fire together, now.
    # A job that backfills has runs that build on the previous one: its occurrences still
    # in the catch-up window, and those that fall due while a backlog drains, queue behind
    # the backlog too, or the newest would start beside the oldest (decision 0043). The
    # planner cannot see a backlog, so every scheduled run of such a job queues; `skip`
    # and `replace` keep their own meaning.
    overlap = job.overlap
    if job.misfire.mode is MisfireMode.BACKFILL and job.overlap is Overlap.ALLOW:
        overlap = Overlap.QUEUE
    backfilled = Overlap.QUEUE if job.misfire.mode is MisfireMode.BACKFILL else job.overlap
    runs = [_run(job, t, RunState.SKIPPED, t, REASON_MISFIRE) for t in skipped]
    runs += [_run(job, t, RunState.PENDING, now, None, backfilled) for t in fire_now]
    runs += [
        _run(
            job,
            t,
            RunState.PENDING,
            t + jitter_offset(job.id, t, job.jitter_seconds),
            None,
            overlap,
        )
        for t in occurrences[len(missed) :]
    ]
    state = JobState.ACTIVE if following is not None else JobState.COMPLETED
    last = occurrences[-1] if occurrences else job.last_fire_at
    advance = JobAdvance(
        job.id, job.version, following, last, state, expected_next_fire_at=job.next_fire_at
    )
    return JobPlan(runs, advance)


def _occurrences(
    job: Job, schedule: Schedule, until: datetime, limit: int
) -> tuple[list[datetime], datetime | None]:
    found: list[datetime] = []
    t = job.next_fire_at
    while t is not None and t <= until and len(found) < limit:
        found.append(t)
        t = next_fire(schedule, t)
    return found, t


def _kept(job: Job) -> int:
    """How many of the newest missed occurrences the misfire policy fires."""
    policy = job.misfire
    if policy.mode is MisfireMode.SKIP:
        return 0
    if policy.mode is MisfireMode.FIRE_ONCE:
        return 1
    return max(min(policy.limit, MAX_MISFIRE_LIMIT), 0)


def _missed_later(
    job: Job, schedule: Schedule, following: datetime | None, cutoff: datetime
) -> int:
    """How many missed occurrences come after this plan's slice (a backlog longer than a
    slice), counted no further than the policy keeps: at most that many, however long the
    backlog. The newest missed occurrences, the ones a policy fires, are in the last
    slices; a slice that sees at least that many missed after it fires none of its own."""
    keep = _kept(job)
    n = 0
    t = following
    while t is not None and t < cutoff and n < keep:
        n += 1
        t = next_fire(schedule, t)
    return n


def _misfire(job: Job, missed: list[datetime], later: int) -> tuple[list[datetime], list[datetime]]:
    """Split missed occurrences into (fire now, skip): every policy but ``skip`` fires the
    newest few of the whole backlog (``later`` of which come after this slice)."""
    keep = max(_kept(job) - later, 0)
    cut = max(len(missed) - keep, 0)
    return missed[cut:], missed[:cut]


def _run(
    job: Job,
    scheduled_for: datetime,
    state: RunState,
    available_at: datetime,
    reason: str | None,
    overlap: Overlap | None = None,
) -> NewRun:
    key, limit = run_key(job, job.payload)
    return NewRun(
        tenant_id=job.tenant_id,
        job_id=job.id,
        scheduled_for=scheduled_for,
        available_at=available_at,
        pool=job.pool,
        priority=job.priority,
        max_attempts=max_attempts(job),
        job_version=job.version,
        state=state,
        reason=reason,
        overlap=job.overlap if overlap is None else overlap,
        concurrency_key=key,
        concurrency_limit=limit,
    )


def max_attempts(job: Job) -> int:
    """The attempts a run of ``job`` gets (see :func:`cronwheel.core.lifecycle.attempt_budget`)."""
    return attempt_budget(job.retry, job.delivery)
