"""The ``cronwheel dev`` console's events, read from a real store on a frozen clock: each
once, at its own time; a claimed run is not started before its start; a restart shows
the earlier events as history and never again as new ones."""

from __future__ import annotations

from datetime import timedelta

from cronwheel.console.events import EventFeed, Kind
from cronwheel.console.lines import render
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import AttemptOutcome, ClaimedRun, JobState, RunState, WorkerInfo
from cronwheel.store.base import Completion, Store
from cronwheel.store.conformance.factories import at, make_job, make_run


async def _claim(store: Store, now: float) -> ClaimedRun:
    [claimed] = await store.claim_runs(
        "w1", ["default"], limit=1, now=at(now), prefetch_until=at(now + 5), lease_seconds=30
    )
    return claimed


def _ended(c: ClaimedRun, start: float, end: float, *, retry_at: float | None) -> Completion:
    failed = retry_at is not None
    return Completion(
        run_id=c.run.id,
        fence=c.run.fence,
        worker_id="w1",
        state=RunState.PENDING if failed else RunState.SUCCEEDED,
        outcome=AttemptOutcome.FAILED if failed else AttemptOutcome.SUCCEEDED,
        started_at=at(start),
        finished_at=at(end),
        error_class="ValueError" if failed else None,
        error_message="first line\nsecond line" if failed else None,
        available_at=at(retry_at) if failed else None,
    )


async def test_each_event_once_at_its_time_and_history_after_a_restart(store: Store) -> None:
    job = make_job(name="report")
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(2))], [])
    clock = FrozenClock(at(0))
    feed = EventFeed(store, clock, own_pools=["default"])
    assert await feed.start() == []

    first = await _claim(store, 0)  # prefetched: due at 2 s
    clock.set(at(1))
    assert await feed.poll() == []  # claimed, not started: nothing happened yet

    clock.set(at(2))
    [started] = await feed.poll()
    assert (started.kind, started.at, started.attempt_number) == (Kind.STARTED, at(2), 1)
    assert render(started, own_worker="w1")[0] == "12:00:02.000 run 1 report attempt 1/3 started"
    assert await feed.poll() == []  # once

    await store.complete_runs([_ended(first, 2, 3, retry_at=4)])
    clock.set(at(3.5))
    [failed] = await feed.poll()
    assert (failed.kind, failed.at, failed.attempt_number) == (Kind.ENDED, at(3), 1)
    assert render(failed, own_worker="w1")[0] == (
        "12:00:03.000 run 1 report attempt 1/3 failed in 1.0 s: ValueError: first line⏎second"
        " line → retry at 12:00:04.000"
    )

    second = await _claim(store, 4)
    await store.complete_runs([_ended(second, 4, 4.5, retry_at=None)])
    clock.set(at(5))
    # both between two polls: its start is still reported, before its end, on its line
    lines = [render(e, own_worker="w1")[0] for e in await feed.poll()]
    assert lines == [
        "12:00:04.000 run 1 report attempt 2/3 started",
        "12:00:04.500 run 1 report attempt 2/3 succeeded in 500 ms",
    ]
    assert await feed.poll() == []

    # a restart: the earlier attempts are history, and nothing is reported again
    clock.set(at(60))
    again = EventFeed(store, clock, own_pools=["default"])
    history = [render(e, own_worker="w2", history=True)[0] for e in await again.start()]
    assert history == [
        "history 2030-01-01 12:00:03.000 run 1 report attempt 1/3 failed on w1 in 1.0 s:"
        " ValueError: first line⏎second line → retry at 12:00:04.000",
        "history 2030-01-01 12:00:04.500 run 1 report attempt 2/3 succeeded on w1 in 500 ms",
    ]
    assert await again.poll() == []


async def test_a_cancelled_run_is_reported_once_and_a_job_no_worker_serves_waits(
    store: Store,
) -> None:
    job, mail = make_job(name="report"), make_job(name="mailer", pool="email")
    await store.create_jobs([job, mail])
    await store.materialize_runs([make_run(job, at(30)), make_run(mail, at(1))], [])
    clock = FrozenClock(at(0))
    feed = EventFeed(store, clock, own_pools=["default"])
    await feed.start()
    [pending] = await store.list_runs("default", job_id=job.id)
    await store.cancel_run("default", pending.id, now=at(2), actor="ops")
    clock.set(at(4))
    events = await feed.poll(check_waiting=True)
    assert [render(e)[0] for e in events] == [
        "12:00:02.000 run 1 report cancelled: cancelled by ops",
        "12:00:04.000 job mailer waits: no worker serves pool 'email'"
        " (this dev process serves: default)",
    ]
    clock.set(at(5))
    assert await feed.poll(check_waiting=True) == []  # each said once
    # a live worker serves the pool now: no word about it
    await store.register_worker(WorkerInfo("w9", "default", "host", ("email",), 1, 0, at(0), at(5)))
    clock.set(at(6))
    assert await feed.poll(check_waiting=True) == []
    clock.set(at(6) + timedelta(minutes=5))  # that worker is gone: the job waits again
    [waits] = await feed.poll(check_waiting=True)
    assert waits.kind is Kind.WAITS


async def test_runs_closed_together_make_one_line(store: Store) -> None:
    job = make_job(name="nightly")
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(10 + i)) for i in range(5)], [])
    clock = FrozenClock(at(0))
    feed = EventFeed(store, clock, limit=3)
    await feed.start()
    await store.set_job_state(
        "default", job.id, JobState.CANCELLED, next_fire_at=None, now=at(1), actor="ops"
    )
    clock.set(at(2))
    [closed] = await feed.poll()
    assert (
        render(closed)[0]
        == "12:00:01.000 3 or more runs of nightly from run 1 cancelled: job cancelled"
    )
    clock.set(at(3))
    assert await feed.poll() == []
