"""Next fire times with offsets and DST marks, as the dashboard and the preview show them."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwheel.schedule import schedule_from_dict
from cronwheel.schedule.preview import MAX_PREVIEW, preview, upcoming


def test_a_spring_forward_gap_moves_the_fire_and_marks_the_offset_change() -> None:
    schedule = schedule_from_dict(
        {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"}
    )
    fires = preview(schedule, datetime(2026, 3, 27, tzinfo=UTC), 4)
    assert [f.local.strftime("%m-%d %H:%M") for f in fires] == [
        "03-27 02:30",
        "03-28 02:30",
        "03-29 03:00",
        "03-30 02:30",
    ]
    assert [f.offset for f in fires] == ["+01:00", "+01:00", "+02:00", "+02:00"]
    assert [f.dst for f in fires] == [None, None, "moved", None]
    assert [f.offset_changed for f in fires] == [False, False, True, False]


def test_a_repeated_hour_fires_twice_under_the_both_policy() -> None:
    schedule = schedule_from_dict(
        {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris", "dst_overlap": "both"}
    )
    fires = preview(schedule, datetime(2026, 10, 25, tzinfo=UTC), 2)
    assert [f.at.strftime("%H:%M") for f in fires] == ["00:30", "01:30"]
    assert [f.dst for f in fires] == ["repeated", "repeated"]
    assert [f.offset for f in fires] == ["+02:00", "+01:00"]


def test_other_kinds_are_in_utc_and_a_one_time_job_has_one_fire() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    every = preview(schedule_from_dict({"kind": "interval", "every_seconds": 60}), now, 3)
    assert [f.at.minute for f in every] == [1, 2, 3] and {f.offset for f in every} == {"+00:00"}
    once = preview(schedule_from_dict({"kind": "once", "at": "2026-02-01T00:00:00Z"}), now, 10)
    assert len(once) == 1
    assert preview(schedule_from_dict({"kind": "manual"}), now, 10) == []


def test_the_count_is_capped() -> None:
    schedule = schedule_from_dict({"kind": "interval", "every_seconds": 1})
    assert len(upcoming(schedule, datetime(2026, 1, 1, tzinfo=UTC), 10_000)) == MAX_PREVIEW
