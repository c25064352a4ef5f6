"""Backfill (issue 16): a run for every past occurrence of a range that has none, on
each store; and the misfire modes ``backfill`` and ``fire_last`` told apart."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cronwheel.control.service import MAX_BACKFILL_RUNS, JobService
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import MisfireMode, Overlap, Priority, RunState
from cronwheel.engine.scheduler import Scheduler
from cronwheel.errors import Conflict, InvalidInput
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import at, succeeded

EVERY_MINUTE = {"kind": "cron", "cron": "* * * * *", "timezone": "UTC"}
HANDLER = {"type": "handler", "name": "noop"}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(at(1))  # the first fire of a job created now is minute 1


@pytest.fixture
def service(store: Store, clock: FrozenClock) -> JobService:
    return JobService(store, clock=clock, actor="tester")


async def _claim(store: Store, clock: FrozenClock, limit: int = 100) -> list[datetime]:
    claimed = await store.claim_runs(
        "w", ["default"], limit=limit, now=clock.now(), prefetch_until=clock.now(), lease_seconds=30
    )
    return [c.run.scheduled_for for c in claimed]


async def test_backfill_creates_a_run_per_past_occurrence_once(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="b", schedule=EVERY_MINUTE, action=HANDLER)
    clock.advance(3600)
    first = await service.backfill(job.id, start=at(60 * 10), end=at(60 * 15))
    assert (first.occurrences, first.created) == (5, 5)
    assert (first.first, first.last) == (at(600), at(840))  # end is excluded
    again = await service.backfill(job.id, start=at(60 * 10), end=at(60 * 15))
    assert (again.occurrences, again.created) == (5, 0)
    wider = await service.backfill(job.id, start=at(60 * 8), end=at(60 * 16) + timedelta(seconds=1))
    assert (wider.occurrences, wider.created) == (9, 4)  # minutes 8, 9, 15 and 16 are new
    runs = sorted(await service.runs(job.id), key=lambda r: r.scheduled_for)
    assert [r.scheduled_for for r in runs] == [at(60 * m) for m in range(8, 17)]
    assert {(r.state, r.priority, r.reason) for r in runs} == {
        (RunState.PENDING, Priority.LOW, "backfill by tester")
    }
    assert {r.available_at for r in runs} == {clock.now()}


async def test_an_occurrence_the_scheduler_recorded_keeps_its_run(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    job = await service.create(name="b", schedule=EVERY_MINUTE, action=HANDLER)
    clock.advance(60)
    await Scheduler(store, clock=clock).run_once()  # fires minute 1
    fired = {r.scheduled_for: r.id for r in await service.runs(job.id)}
    assert at(60) in fired and at(0) not in fired
    clock.advance(600)
    done = await service.backfill(job.id, start=at(0), end=at(120), priority=Priority.HIGH)
    assert (done.occurrences, done.created) == (2, 1)  # minutes 0 and 1; 1 had its run
    runs = {r.scheduled_for: r for r in await service.runs(job.id)}
    assert runs[at(60)].id == fired[at(60)] and runs[at(60)].priority is Priority.NORMAL
    assert runs[at(0)].priority is Priority.HIGH


async def test_backfill_refuses_what_it_cannot_do(service: JobService, clock: FrozenClock) -> None:
    job = await service.create(name="b", schedule=EVERY_MINUTE, action=HANDLER)
    clock.advance(10 * 86400)
    cases = [
        ({"start": at(0), "end": at(0)}, "end", "after start"),
        ({"start": at(0), "end": clock.now() + timedelta(seconds=1)}, "end", "future"),
        ({"start": at(0).replace(tzinfo=None), "end": at(60)}, "start", "UTC offset"),
        ({"start": at(0), "end": at(60 * (MAX_BACKFILL_RUNS + 1))}, "end", "in parts"),
    ]
    for kwargs, field, words in cases:
        with pytest.raises(InvalidInput) as caught:
            await service.backfill(job.id, **kwargs)  # type: ignore[arg-type]
        assert caught.value.field == field and words in caught.value.reason
    assert await service.runs(job.id) == []  # nothing half-written
    full = await service.backfill(job.id, start=at(0), end=at(60 * MAX_BACKFILL_RUNS))
    assert full.created == MAX_BACKFILL_RUNS
    await service.pause(job.id)
    with pytest.raises(Conflict, match="paused"):
        await service.backfill(job.id, start=at(0), end=at(60))
    once = await service.create(
        name="o",
        schedule={"kind": "once", "at": (clock.now() + timedelta(hours=1)).isoformat()},
        action=HANDLER,
    )
    with pytest.raises(Conflict, match="trigger it instead"):
        await service.backfill(once.id, start=at(0), end=at(600))


@pytest.mark.parametrize(
    ("mode", "claimed_at_once"),
    [
        (MisfireMode.BACKFILL, [at(8 * 60)]),
        (MisfireMode.FIRE_LAST, [at(m * 60) for m in (8, 9, 10)]),
    ],
)
async def test_after_downtime_backfill_replays_in_order_and_fire_last_all_at_once(
    service: JobService,
    store: Store,
    clock: FrozenClock,
    mode: MisfireMode,
    claimed_at_once: list[datetime],
) -> None:
    await service.create(
        name="m",
        schedule=EVERY_MINUTE,
        action=HANDLER,
        catchup_seconds=1,
        misfire={"mode": mode.value, "limit": 3},
    )
    clock.advance(10 * 60 + 30)  # down from minute 1 to 10:30: minutes 1..10 missed
    await Scheduler(store, clock=clock).run_once()
    assert await _claim(store, clock) == claimed_at_once
    if mode is MisfireMode.BACKFILL:
        # the next backfilled occurrence waits until the one before has finished
        assert await _claim(store, clock) == []
        runs = await store.list_runs("default", limit=100)
        pending = sorted(r.scheduled_for for r in runs if r.state is RunState.PENDING)
        assert pending == [at(9 * 60), at(10 * 60)]
        assert {r.overlap for r in runs if r.state is not RunState.SKIPPED} == {Overlap.QUEUE}


@pytest.mark.both_stores  # the stores differ here
async def test_a_backfill_skips_occurrences_whose_runs_were_archived(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    """On PostgreSQL maintenance moves finished runs out of runs, whose unique index no
    longer sees them (decision 0032); a backfill still creates their occurrences once."""
    job = await service.create(name="b", schedule=EVERY_MINUTE, action=HANDLER)
    clock.advance(3600)
    await service.backfill(job.id, start=at(60 * 10), end=at(60 * 13))
    for run in await service.runs(job.id):
        await store.cancel_run("default", run.id, now=clock.now(), actor="tester")
    clock.advance(60)
    moved = await store.archive_runs(now=clock.now(), partition_seconds=3600)
    assert moved == (3 if store.__class__.__name__ == "PostgresStore" else 0)
    again = await service.backfill(job.id, start=at(60 * 9), end=at(60 * 14))
    assert (again.occurrences, again.created) == (5, 2)  # minutes 9 and 13 are new
    runs = sorted(await service.runs(job.id), key=lambda r: r.scheduled_for)
    assert [(r.scheduled_for, r.state) for r in runs] == [
        (at(60 * 9), RunState.PENDING),
        *((at(60 * m), RunState.CANCELLED) for m in (10, 11, 12)),
        (at(60 * 13), RunState.PENDING),
    ]


async def test_after_downtime_a_backfill_job_runs_every_occurrence_one_at_a_time_in_order(
    service: JobService, store: Store, clock: FrozenClock
) -> None:
    """Issue 29, item 3: as if there had been no outage. The newest occurrence, still in
    the catch-up window, does not start beside the oldest missed one, and the occurrences
    that fall due while the backlog drains wait their turn behind it."""
    await service.create(
        name="ledger",
        schedule=EVERY_MINUTE,
        action=HANDLER,
        catchup_seconds=45,
        misfire={"mode": "backfill", "limit": 100},
    )
    clock.advance(10 * 60)  # down until 10:31: minutes 1..9 missed, minute 10 in the window
    scheduler = Scheduler(store, clock=clock)
    await scheduler.run_once()
    started: list[datetime] = []
    while len(started) < 11:  # minutes 1..10, then minute 11, due while they ran
        claimed = await store.claim_runs(
            "w",
            ["default"],
            limit=100,
            now=clock.now(),
            prefetch_until=clock.now(),
            lease_seconds=30,
        )
        assert len(claimed) == 1, [c.run.scheduled_for for c in claimed]
        started.append(claimed[0].run.scheduled_for)
        clock.advance(20)  # each run takes 20 s
        await store.complete_runs([succeeded(c, clock.now()) for c in claimed])
        await scheduler.run_once()
    assert started == [at(60 * m) for m in range(1, 12)]
