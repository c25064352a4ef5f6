"""Schedules to and from JSON-safe dicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from cronwheel.schedule import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
    schedule_from_dict,
    schedule_to_dict,
)

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2024, 7, 1, 12, 0, tzinfo=UTC)

SCHEDULES: list[Schedule] = [
    ImmediateSchedule(),
    ImmediateSchedule(start_at=T0, end_at=T1),
    OnceSchedule(T0),
    OnceSchedule(T0, end_at=T1),
    DelaySchedule(30),
    DelaySchedule(1.5, start_at=T0),
    CronSchedule("0 9 * * MON-FRI", "Europe/Paris"),
    CronSchedule(
        "0 0 12 ? * 6L",
        "America/New_York",
        dialect="quartz",
        dst_gap="shift",
        dst_overlap="both",
        start_at=T0,
        end_at=T1,
    ),
    IntervalSchedule(60),
    IntervalSchedule(3600, T0, end_at=T1),
    ManualSchedule(),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s.kind}")
def test_round_trip_through_json(schedule: Schedule) -> None:
    data = json.loads(json.dumps(schedule_to_dict(schedule)))
    assert schedule_from_dict(data) == schedule


def test_dict_forms() -> None:
    assert schedule_to_dict(ImmediateSchedule()) == {"kind": "immediate"}
    assert schedule_to_dict(ManualSchedule()) == {"kind": "manual"}
    assert schedule_to_dict(CronSchedule("0 9 * * *", "Europe/Paris")) == {
        "kind": "cron",
        "cron": "0 9 * * *",
        "timezone": "Europe/Paris",
    }
    assert schedule_to_dict(OnceSchedule(T0, start_at=T0)) == {
        "kind": "once",
        "at": "2024-06-01T12:00:00+00:00",
        "start_at": "2024-06-01T12:00:00+00:00",
    }
    assert schedule_to_dict(DelaySchedule(30)) == {"kind": "delay", "seconds": 30}
    assert schedule_to_dict(IntervalSchedule(60, T0)) == {
        "kind": "interval",
        "every_seconds": 60,
        "anchor": "2024-06-01T12:00:00+00:00",
    }


def test_inputs_are_normalised_to_utc() -> None:
    once = schedule_from_dict({"kind": "once", "at": "2024-06-01T14:00:00+02:00"})
    assert once == OnceSchedule(T0)
    assert schedule_from_dict({"kind": "once", "at": "2024-06-01T12:00:00Z"}) == OnceSchedule(T0)
    cron = schedule_from_dict({"kind": "cron", "cron": "* * * * *"})
    assert cron == CronSchedule("* * * * *", "UTC")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "schedule: expected an object, got list"),
        ({}, "kind: is required"),
        ({"kind": "weekly"}, "kind: unknown schedule kind 'weekly'"),
        ({"kind": 3}, "kind: unknown schedule kind 3"),
        ({"kind": "once"}, "at: is required for kind once"),
        ({"kind": "cron", "cron": "* * * * *", "tz": "UTC"}, "tz: unknown field for kind cron"),
        ({"kind": "immediate", "b": 1, "a": 2}, "a, b: unknown field for kind immediate"),
        ({"kind": "delay", "seconds": "5"}, "seconds: expected a number of seconds, got str"),
        ({"kind": "delay", "seconds": 0}, "seconds: must be a finite number of seconds > 0"),
        ({"kind": "interval", "every_seconds": -1}, "every_seconds: must be a finite number"),
        ({"kind": "once", "at": 5}, "at: expected an ISO 8601 string, got int"),
        ({"kind": "once", "at": "tomorrow"}, "at: 'tomorrow' is not an ISO 8601 datetime"),
        ({"kind": "once", "at": "2024-01-01T00:00:00"}, "at: must include a UTC offset"),
        ({"kind": "once", "at": None}, "at: expected an ISO 8601 string, got NoneType"),
        (
            {"kind": "immediate", "start_at": "2024-02-01T00:00Z", "end_at": "2024-01-01T00:00Z"},
            "end_at: must not be before start_at",
        ),
        ({"kind": "manual", "start_at": "2024-01-01T00:00Z"}, "start_at: unknown field for kind"),
        ({"kind": "manual", "end_at": None}, "end_at: unknown field for kind manual"),
        ({"kind": "cron", "cron": 5}, "cron: expected a string, got int"),
        ({"kind": "cron", "cron": "* * * * 8"}, "cron: day-of-week: 8 is out of range 0-7"),
        ({"kind": "cron", "cron": "* * * * *", "timezone": "Mars/Olympus"}, "timezone: unknown"),
        ({"kind": "cron", "cron": "* * * * *", "dialect": "q"}, "dialect: unknown dialect 'q'"),
        ({"kind": "cron", "cron": "* * * * *", "dst_gap": "x"}, "dst_gap: unknown policy 'x'"),
        ({"kind": "interval", "every_seconds": 5, "anchor": "x"}, "anchor: 'x' is not an ISO"),
    ],
)
def test_errors_name_the_field(data: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        schedule_from_dict(data)
    assert str(caught.value).startswith(message)


def test_optional_datetimes_may_be_null() -> None:
    data = {"kind": "immediate", "start_at": None, "end_at": None}
    assert schedule_from_dict(data) == ImmediateSchedule()
