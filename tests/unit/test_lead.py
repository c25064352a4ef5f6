"""The scheduler's lead: the horizon, stretched by the measured pace when a herd is due."""

from __future__ import annotations

import pytest

from cronwheel.core.lead import DEFAULT_SECONDS_PER_JOB, MIN_SAMPLE, SAFETY, WEIGHT, Pace


def test_the_lead_is_the_horizon_plus_twice_the_time_the_herd_takes() -> None:
    pace = Pace(seconds_per_job=0.001)
    assert pace.lead(0, horizon=2.0, max_lead=30.0) == 2.0
    assert pace.lead(1_000, horizon=2.0, max_lead=30.0) == pytest.approx(2.0 + SAFETY * 1.0)
    assert pace.lead(10_000, horizon=2.0, max_lead=30.0) == pytest.approx(2.0 + SAFETY * 10.0)


def test_the_lead_never_passes_max_lead() -> None:
    pace = Pace(seconds_per_job=0.001)
    assert pace.lead(1_000_000, horizon=2.0, max_lead=30.0) == 30.0
    assert pace.lead(1_000_000, horizon=2.0, max_lead=2.0) == 2.0


def test_the_count_stops_where_the_lead_reaches_max_lead() -> None:
    pace = Pace(seconds_per_job=0.001)
    limit = pace.count_limit(horizon=2.0, max_lead=30.0)
    assert pace.lead(limit - 1, horizon=2.0, max_lead=30.0) == pytest.approx(30.0, abs=0.01)
    assert pace.lead(limit, horizon=2.0, max_lead=30.0) == 30.0
    assert limit == 14_001
    # With no room to stretch, there is nothing to count.
    assert pace.count_limit(horizon=2.0, max_lead=2.0) == 0


def test_a_batch_moves_the_pace_by_its_weight() -> None:
    pace = Pace()
    pace.observe(1_000, 1.0)  # 1 ms a job
    expected = DEFAULT_SECONDS_PER_JOB + WEIGHT * (0.001 - DEFAULT_SECONDS_PER_JOB)
    assert pace.seconds_per_job == pytest.approx(expected)
    for _ in range(50):
        pace.observe(1_000, 1.0)
    assert pace.seconds_per_job == pytest.approx(0.001)


def test_small_batches_and_no_time_are_not_measured() -> None:
    pace = Pace()
    # One job in 5 ms is a round trip's fixed cost, not a cost per job.
    pace.observe(MIN_SAMPLE - 1, 0.5)
    pace.observe(1_000, 0.0)  # a frozen clock
    assert pace.seconds_per_job == DEFAULT_SECONDS_PER_JOB
