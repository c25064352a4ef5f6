"""Planning a due job: occurrences within the horizon, misfire policies, jitter."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from cronwheel.core.model import (
    MAX_MISFIRE_LIMIT,
    Delivery,
    JobState,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    RetryPolicy,
    RunState,
)
from cronwheel.core.planning import ScheduleCache, jitter_offset, plan_job
from cronwheel.store import _decode as decode
from cronwheel.store.conformance.factories import T0, at, make_job

EVERY_10S = {"kind": "interval", "every_seconds": 10, "anchor": T0.isoformat()}
H = timedelta(seconds=2)


def _plan(
    job_kw: dict[str, object], now_s: float
) -> list[tuple[float, RunState, float, str | None]]:
    job = make_job(**job_kw)  # type: ignore[arg-type]
    plan = plan_job(job, at(now_s), horizon=H)
    return [
        (
            (r.scheduled_for - T0).total_seconds(),
            r.state,
            (r.available_at - T0).total_seconds(),
            r.reason,
        )
        for r in plan.runs
    ]


def test_occurrences_within_the_horizon_and_the_next_fire() -> None:
    job = make_job(schedule=EVERY_10S, next_fire_at=at(10))
    plan = plan_job(job, at(9), horizon=timedelta(seconds=12))
    assert [r.scheduled_for for r in plan.runs] == [at(10), at(20)]
    assert (plan.advance.next_fire_at, plan.advance.last_fire_at) == (at(30), at(20))
    assert (plan.advance.version, plan.advance.state) == (job.version, JobState.ACTIVE)


def test_nothing_due_yet_plans_nothing() -> None:
    job = make_job(schedule=EVERY_10S, next_fire_at=at(10))
    plan = plan_job(job, at(0), horizon=H)
    assert plan.runs == [] and plan.advance.next_fire_at == at(10)


def test_a_one_time_job_completes() -> None:
    job = make_job(schedule={"kind": "once", "at": at(5).isoformat()}, next_fire_at=at(5))
    plan = plan_job(job, at(4), horizon=H)
    assert [r.scheduled_for for r in plan.runs] == [at(5)]
    assert (plan.advance.next_fire_at, plan.advance.state) == (None, JobState.COMPLETED)


def test_a_job_past_its_end_completes() -> None:
    schedule = {**EVERY_10S, "end_at": at(20).isoformat()}
    plan = plan_job(make_job(schedule=schedule, next_fire_at=at(20)), at(19), horizon=H)
    assert [r.scheduled_for for r in plan.runs] == [at(20)]
    assert plan.advance.state is JobState.COMPLETED


def _missed(mode: MisfireMode, limit: int = 100) -> list[tuple[float, RunState, float, str | None]]:
    # down from T0+10 to T0+66: occurrences 10..60 are older than the 5 s catch-up window
    kw = {
        "schedule": EVERY_10S,
        "next_fire_at": at(10),
        "catchup_seconds": 5.0,
        "misfire": MisfirePolicy(mode, limit),
    }
    return _plan(kw, 66)


def test_misfire_fire_once_fires_the_latest_now_and_skips_the_rest() -> None:
    assert _missed(MisfireMode.FIRE_ONCE) == [
        (10, RunState.SKIPPED, 10, "misfire"),
        (20, RunState.SKIPPED, 20, "misfire"),
        (30, RunState.SKIPPED, 30, "misfire"),
        (40, RunState.SKIPPED, 40, "misfire"),
        (50, RunState.SKIPPED, 50, "misfire"),
        (60, RunState.PENDING, 66, None),
    ]


def test_misfire_skip_records_every_missed_occurrence() -> None:
    runs = _missed(MisfireMode.SKIP)
    assert [(s, st) for s, st, _, _ in runs] == [
        (t, RunState.SKIPPED) for t in (10, 20, 30, 40, 50, 60)
    ]


def test_misfire_backfill_fires_all_up_to_the_cap() -> None:
    assert [st for _, st, _, _ in _missed(MisfireMode.BACKFILL)] == [RunState.PENDING] * 6
    capped = _missed(MisfireMode.BACKFILL, limit=4)
    assert [st for _, st, _, _ in capped] == [RunState.SKIPPED] * 2 + [RunState.PENDING] * 4


def test_misfire_fire_last_n() -> None:
    runs = _missed(MisfireMode.FIRE_LAST, limit=2)
    assert [(s, st) for s, st, _, _ in runs if st is RunState.PENDING] == [
        (50, RunState.PENDING),
        (60, RunState.PENDING),
    ]


def _overlaps(mode: MisfireMode, overlap: Overlap) -> list[tuple[float, RunState, Overlap]]:
    job = make_job(
        schedule=EVERY_10S,
        next_fire_at=at(10),
        catchup_seconds=5.0,
        misfire=MisfirePolicy(mode, 3),
        overlap=overlap,
    )
    return [
        ((r.scheduled_for - T0).total_seconds(), r.state, r.overlap)
        for r in plan_job(job, at(66), horizon=H).runs
        if r.state is RunState.PENDING
    ]


def test_backfill_runs_the_missed_one_at_a_time_and_fire_last_together() -> None:
    # The same three occurrences fire in both modes; a backfill replays them in order,
    # each once the one before has finished (queue), fire_last at the job's own policy.
    assert _overlaps(MisfireMode.BACKFILL, Overlap.ALLOW) == [
        (t, RunState.PENDING, Overlap.QUEUE) for t in (40, 50, 60)
    ]
    assert _overlaps(MisfireMode.FIRE_LAST, Overlap.ALLOW) == [
        (t, RunState.PENDING, Overlap.ALLOW) for t in (40, 50, 60)
    ]


def _fired_over_a_long_backlog(mode: MisfireMode, limit: int) -> list[float]:
    """Plan slice after slice of a 10,000-occurrence outage, as the scheduler's ticks do."""
    job = make_job(
        schedule=EVERY_10S,
        next_fire_at=at(10),
        catchup_seconds=5.0,
        misfire=MisfirePolicy(mode, limit),
    )
    fired: list[float] = []
    now = at(100_006)
    while job.next_fire_at is not None and job.next_fire_at <= now:
        plan = plan_job(job, now, horizon=H, limit=700)
        fired += [
            (r.scheduled_for - T0).total_seconds() for r in plan.runs if r.state is RunState.PENDING
        ]
        job = replace(job, next_fire_at=plan.advance.next_fire_at)
    return fired


@pytest.mark.parametrize(
    ("mode", "limit", "expected"),
    [
        (MisfireMode.FIRE_ONCE, 100, [100_000.0]),
        (MisfireMode.SKIP, 100, []),
        # the newest N, even where they straddle two slices (10,000 = 14 x 700 + 200)
        (MisfireMode.FIRE_LAST, 300, [float(t) for t in range(97_010, 100_001, 10)]),
        (MisfireMode.BACKFILL, 5, [float(t) for t in range(99_960, 100_001, 10)]),
    ],
)
def test_a_backlog_longer_than_a_slice_fires_what_the_policy_says_once(
    mode: MisfireMode, limit: int, expected: list[float]
) -> None:
    assert _fired_over_a_long_backlog(mode, limit) == expected


def test_a_misfire_limit_above_the_maximum_is_planned_at_the_maximum() -> None:
    job = make_job(
        schedule=EVERY_10S,
        next_fire_at=at(10),
        catchup_seconds=5.0,
        misfire=MisfirePolicy(MisfireMode.FIRE_LAST, 50_000),
    )
    plan = plan_job(job, at(100_006), horizon=H, limit=100_000)
    assert sum(r.state is RunState.PENDING for r in plan.runs) == MAX_MISFIRE_LIMIT


def test_within_the_catchup_window_nothing_is_a_misfire() -> None:
    kw = {
        "schedule": EVERY_10S,
        "next_fire_at": at(10),
        "catchup_seconds": 60.0,
        "misfire": MisfirePolicy(MisfireMode.SKIP),
    }
    assert [st for _, st, _, _ in _plan(kw, 65)] == [RunState.PENDING] * 6


def test_a_long_backlog_is_planned_in_slices() -> None:
    job = make_job(schedule=EVERY_10S, next_fire_at=at(10), catchup_seconds=0.0)
    plan = plan_job(job, at(100_000), horizon=H, limit=50)
    assert len(plan.runs) == 50
    assert plan.advance.next_fire_at == at(510)


def test_jitter_is_stable_per_occurrence_and_spread_within_the_window() -> None:
    offsets = [jitter_offset("job", at(i), 30.0).total_seconds() for i in range(2000)]
    assert offsets == [jitter_offset("job", at(i), 30.0).total_seconds() for i in range(2000)]
    assert all(0 <= o < 30 for o in offsets)
    buckets = [sum(q * 3 <= o < (q + 1) * 3 for o in offsets) for q in range(10)]
    assert min(buckets) > 120, buckets
    assert jitter_offset("job", T0, 0.0) == timedelta(0)


def test_jitter_moves_available_at_not_the_occurrence() -> None:
    job = make_job(schedule=EVERY_10S, next_fire_at=at(10), jitter_seconds=5.0)
    [run] = plan_job(job, at(9), horizon=H).runs
    assert run.scheduled_for == at(10)
    assert run.available_at == at(10) + jitter_offset(job.id, at(10), 5.0)


@pytest.mark.parametrize(
    ("delivery", "expected"), [(Delivery.AT_LEAST_ONCE, 5), (Delivery.AT_MOST_ONCE, 1)]
)
def test_attempt_budget_follows_delivery(delivery: Delivery, expected: int) -> None:
    job = make_job(
        schedule=EVERY_10S,
        next_fire_at=at(10),
        delivery=delivery,
        retry=RetryPolicy(max_attempts=5),
    )
    [run] = plan_job(job, at(9), horizon=H).runs
    assert run.max_attempts == expected


def test_the_schedule_cache_parses_a_schedule_once_for_every_job_that_has_it() -> None:
    cache = ScheduleCache()
    first, second = make_job(schedule=dict(EVERY_10S)), make_job(schedule=dict(EVERY_10S))
    assert first.id != second.id and first.schedule is not second.schedule
    assert cache.get(second) is cache.get(first)
    # A job whose schedule changed (same id) gets the new one, not the cached old one.
    hourly = {"kind": "interval", "every_seconds": 3600, "anchor": T0.isoformat()}
    changed = replace(first, schedule=hourly, version=first.version + 1)
    assert cache.get(changed).every_seconds == 3600  # type: ignore[union-attr]
    assert cache.get(first).every_seconds == 10  # type: ignore[union-attr]


def test_the_schedule_cache_is_bounded() -> None:
    cache = ScheduleCache(size=2)
    jobs = [
        make_job(schedule={"kind": "interval", "every_seconds": n, "anchor": T0.isoformat()})
        for n in (10, 20, 30)
    ]
    parsed = [cache.get(j) for j in jobs]
    assert cache.get(jobs[2]) is parsed[2]
    assert cache.get(jobs[0]) is not parsed[0] and cache.get(jobs[0]) == parsed[0]


def test_shared_job_columns_decode_once_per_distinct_text() -> None:
    text = '{"mode":"backfill","limit":7}'
    assert decode.misfire_policy(text) is decode.misfire_policy(str(text))
    assert decode.misfire_policy(text) == MisfirePolicy(MisfireMode.BACKFILL, 7)
    schedule = '{"kind":"cron","cron":"0 9 * * *","timezone":"UTC"}'
    assert decode.schedule(schedule) is decode.schedule(schedule)
    assert decode.schedule(schedule) == json.loads(schedule)


def test_a_backfill_jobs_scheduled_runs_queue_unless_it_skips_or_replaces() -> None:
    """The occurrences of a job that backfills build on the previous one: those in the
    catch-up window queue behind the backlog (decision 0043); skip and replace keep theirs."""

    def live(overlap: Overlap, mode: MisfireMode = MisfireMode.BACKFILL) -> set[Overlap]:
        job = make_job(
            schedule=EVERY_10S,
            next_fire_at=at(10),
            catchup_seconds=25.0,
            misfire=MisfirePolicy(mode, 3),
            overlap=overlap,
        )
        return {
            r.overlap for r in plan_job(job, at(66), horizon=H).runs if r.scheduled_for >= at(41)
        }

    assert live(Overlap.ALLOW) == {Overlap.QUEUE}
    assert live(Overlap.SKIP) == {Overlap.SKIP}
    assert live(Overlap.REPLACE) == {Overlap.REPLACE}
    assert live(Overlap.ALLOW, MisfireMode.FIRE_ONCE) == {Overlap.ALLOW}
