"""How `jobs why` reads a time and finds the fire times around it (pure, no store)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.core.why import Asked, Fire, falls_at, fires_around, read_time, zone_of
from cronwheel.errors import InvalidInput
from cronwheel.schedule import Schedule, schedule_from_dict

NOW = datetime(2030, 10, 27, 12, 0, tzinfo=UTC)  # Europe/Paris falls back that night
CREATED = datetime(2029, 1, 1, tzinfo=UTC)


def cron(expression: str, **extra: str) -> Schedule:
    return schedule_from_dict(
        {"kind": "cron", "cron": expression, "timezone": "Europe/Paris", **extra}
    )


def test_clock_times_are_today_in_the_zone_and_say_so() -> None:
    late = datetime(2030, 10, 27, 23, 30, tzinfo=UTC)  # already the 28th in Paris
    asked = read_time("09:05:30", "Europe/Paris", late)
    assert asked.instant.isoformat() == "2030-10-28T09:05:30+01:00"
    assert asked.assumed == "09:05:30 read as today (2030-10-28) in Europe/Paris"


def test_an_offset_names_an_instant_and_a_naive_time_is_read_in_the_zone() -> None:
    given = read_time("2030-06-01T07:00:00+00:00", "Europe/Paris", NOW)
    assert given.instant.isoformat() == "2030-06-01T09:00:00+02:00" and given.wall is None
    naive = read_time("2030-06-01T09:00", "Europe/Paris", NOW)
    assert naive.instant == given.instant and naive.wall == datetime(2030, 6, 1, 9, 0)


def test_wall_times_in_a_gap_or_an_overlap_are_noted() -> None:
    gap = read_time("2030-03-31T02:30", "Europe/Paris", NOW)
    assert gap.dst_note == "02:30:00 does not exist on 2030-03-31 in Europe/Paris (DST gap)"
    twice = read_time("02:30", "Europe/Paris", NOW)
    assert twice.dst_note is not None and "occurs twice" in twice.dst_note
    assert read_time("12:00", "Europe/Paris", NOW).dst_note is None


@pytest.mark.parametrize("text", ["9h", "25:00", "09:60", "tomorrow", ""])
def test_anything_else_is_refused_naming_at(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        read_time(text, "Europe/Paris", NOW)
    assert caught.value.field == "at"


def test_a_yearly_cron_finds_its_previous_fire_a_year_back() -> None:
    schedule = cron("0 9 1 1 *")
    before, after = fires_around(schedule, NOW, created_at=CREATED)
    assert before is not None and after is not None
    assert (before.at.isoformat(), after.at.isoformat()) == (
        "2030-01-01T09:00:00+01:00",
        "2031-01-01T09:00:00+01:00",
    )


def test_a_per_second_cron_answers_from_the_nearest_seconds() -> None:
    schedule = schedule_from_dict(
        {"kind": "cron", "cron": "* * * * * ?", "timezone": "UTC", "dialect": "quartz"}
    )
    before, after = fires_around(schedule, NOW, created_at=CREATED)
    assert before is not None and after is not None
    assert (before.utc, after.utc) == (NOW, NOW + timedelta(seconds=1))


def test_interval_and_one_time_schedules() -> None:
    every = schedule_from_dict(
        {"kind": "interval", "every_seconds": 3600, "anchor": "2030-10-27T00:15:00+00:00"}
    )
    before, after = fires_around(every, NOW, created_at=CREATED)
    assert before is not None and after is not None
    assert (before.utc.hour, before.utc.minute, after.utc.hour) == (11, 15, 12)
    once = schedule_from_dict({"kind": "once", "at": "2030-10-27T10:00:00+00:00"})
    assert fires_around(once, NOW, created_at=CREATED)[1] is None
    manual = schedule_from_dict({"kind": "manual"})
    assert fires_around(manual, NOW, created_at=CREATED) == (None, None)
    assert zone_of(manual) == "UTC" and zone_of(cron("0 9 * * *")) == "Europe/Paris"


def test_an_occurrence_falls_at_its_minute_or_its_moved_wall_time() -> None:
    asked = Asked(
        datetime(2030, 3, 31, 1, 30, tzinfo=UTC), "Europe/Paris", "", datetime(2030, 3, 31, 2, 30)
    )
    moved = Fire(datetime(2030, 3, 31, 1, 0, tzinfo=UTC), "moved", datetime(2030, 3, 31, 2, 30))
    assert falls_at(moved, asked)
    other_day = Fire(datetime(2030, 3, 30, 1, 30, tzinfo=UTC), None, datetime(2030, 3, 30, 2, 30))
    assert not falls_at(other_day, asked)
    same_minute = Fire(datetime(2030, 3, 31, 1, 30, 45, tzinfo=UTC))
    assert falls_at(same_minute, asked) and not falls_at(None, asked)
