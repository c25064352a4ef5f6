"""DST policies: every gap x overlap choice in zones with 1-hour, 30-minute and
45-minute-offset DST, and in a zone without DST; wall-clock jobs; odd starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from cronwheel.schedule import CronExpression, next_times, occurrences
from tests.schedule.helpers import fires

NY = ZoneInfo("America/New_York")

# zone -> (expression at a wall time inside the 2024 gap, start, expected by dst_gap)
GAPS = {
    "America/New_York": (
        "30 2 * * *",
        "2024-03-09T12:00:00-05:00",
        {
            "gap_end": ["2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"],
            "skip": ["2024-03-11T02:30:00-04:00", "2024-03-12T02:30:00-04:00"],
            "shift": ["2024-03-10T03:30:00-04:00", "2024-03-11T02:30:00-04:00"],
        },
    ),
    "Europe/London": (
        "30 1 * * *",
        "2024-03-30T12:00:00+00:00",
        {
            "gap_end": ["2024-03-31T02:00:00+01:00", "2024-04-01T01:30:00+01:00"],
            "skip": ["2024-04-01T01:30:00+01:00", "2024-04-02T01:30:00+01:00"],
            "shift": ["2024-03-31T02:30:00+01:00", "2024-04-01T01:30:00+01:00"],
        },
    ),
    "Australia/Lord_Howe": (  # a 30-minute gap: 02:00 -> 02:30
        "15 2 * * *",
        "2024-10-05T12:00:00+10:30",
        {
            "gap_end": ["2024-10-06T02:30:00+11:00", "2024-10-07T02:15:00+11:00"],
            "skip": ["2024-10-07T02:15:00+11:00", "2024-10-08T02:15:00+11:00"],
            "shift": ["2024-10-06T02:45:00+11:00", "2024-10-07T02:15:00+11:00"],
        },
    ),
    "Pacific/Chatham": (  # +12:45 -> +13:45 at 02:45
        "0 3 * * *",
        "2024-09-28T12:00:00+12:45",
        {
            "gap_end": ["2024-09-29T03:45:00+13:45", "2024-09-30T03:00:00+13:45"],
            "skip": ["2024-09-30T03:00:00+13:45", "2024-10-01T03:00:00+13:45"],
            "shift": ["2024-09-29T04:00:00+13:45", "2024-09-30T03:00:00+13:45"],
        },
    ),
    "Asia/Kolkata": (  # no DST: every policy is the same
        "30 2 * * *",
        "2024-03-09T12:00:00+05:30",
        {
            policy: ["2024-03-10T02:30:00+05:30", "2024-03-11T02:30:00+05:30"]
            for policy in ("gap_end", "skip", "shift")
        },
    ),
}

# zone -> (expression at a wall time inside the 2024 overlap, start, expected by dst_overlap)
OVERLAPS = {
    "America/New_York": (
        "30 1 * * *",
        "2024-11-02T12:00:00-04:00",
        {
            "first": ["2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"],
            "last": ["2024-11-03T01:30:00-05:00", "2024-11-04T01:30:00-05:00"],
            "both": ["2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00"],
        },
    ),
    "Europe/London": (
        "30 1 * * *",
        "2024-10-26T12:00:00+01:00",
        {
            "first": ["2024-10-27T01:30:00+01:00", "2024-10-28T01:30:00+00:00"],
            "last": ["2024-10-27T01:30:00+00:00", "2024-10-28T01:30:00+00:00"],
            "both": ["2024-10-27T01:30:00+01:00", "2024-10-27T01:30:00+00:00"],
        },
    ),
    "Australia/Lord_Howe": (  # 02:00 -> 01:30: a 30-minute overlap
        "45 1 * * *",
        "2024-04-06T12:00:00+11:00",
        {
            "first": ["2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"],
            "last": ["2024-04-07T01:45:00+10:30", "2024-04-08T01:45:00+10:30"],
            "both": ["2024-04-07T01:45:00+11:00", "2024-04-07T01:45:00+10:30"],
        },
    ),
    "Pacific/Chatham": (  # 03:45 -> 02:45
        "0 3 * * *",
        "2024-04-06T12:00:00+13:45",
        {
            "first": ["2024-04-07T03:00:00+13:45", "2024-04-08T03:00:00+12:45"],
            "last": ["2024-04-07T03:00:00+12:45", "2024-04-08T03:00:00+12:45"],
            "both": ["2024-04-07T03:00:00+13:45", "2024-04-07T03:00:00+12:45"],
        },
    ),
    "Asia/Kolkata": (
        "30 1 * * *",
        "2024-11-02T12:00:00+05:30",
        {
            policy: ["2024-11-03T01:30:00+05:30", "2024-11-04T01:30:00+05:30"]
            for policy in ("first", "last", "both")
        },
    ),
}


@pytest.mark.parametrize("zone", sorted(GAPS))
@pytest.mark.parametrize("gap", ["gap_end", "skip", "shift"])
@pytest.mark.parametrize("overlap", ["first", "last", "both"])
def test_each_policy_pair_in_each_zone(zone: str, gap: str, overlap: str) -> None:
    expr, start, by_gap = GAPS[zone]
    assert fires(expr, start, 2, zone, dst_gap=gap, dst_overlap=overlap) == by_gap[gap]
    expr, start, by_overlap = OVERLAPS[zone]
    assert fires(expr, start, 2, zone, dst_gap=gap, dst_overlap=overlap) == by_overlap[overlap]


class TestFixedTimeJobs:
    def test_gap_occurrences_collapse_into_one(self) -> None:
        found = occurrences(
            CronExpression.parse("0,15,30,45 2 * * *"),
            datetime(2024, 3, 10, tzinfo=NY),
            NY,
            2,
        )
        assert [o.at.isoformat() for o in found] == [
            "2024-03-10T03:00:00-04:00",
            "2024-03-11T02:00:00-04:00",
        ]
        assert [o.dst for o in found] == ["moved", None]
        assert found[0].wall == datetime(2024, 3, 10, 2, 0)

    def test_moved_occurrence_does_not_duplicate_a_regular_one(self) -> None:
        found = occurrences(
            CronExpression.parse("0 2,3 * * *"), datetime(2024, 3, 10, tzinfo=NY), NY, 2
        )
        assert [(o.at.isoformat(), o.dst) for o in found] == [
            ("2024-03-10T03:00:00-04:00", None),
            ("2024-03-11T02:00:00-04:00", None),
        ]

    def test_shifted_occurrence_does_not_duplicate_a_regular_one(self) -> None:
        assert fires(
            "30 2,3 * * *", "2024-03-10T00:00:00-05:00", 2, "America/New_York", dst_gap="shift"
        ) == [
            "2024-03-10T03:30:00-04:00",
            "2024-03-11T02:30:00-04:00",
        ]

    def test_shift_keeps_instants_in_order(self) -> None:
        # 02:10 does not exist (30-minute gap) and shifts to 02:40, after the real 02:35.
        found = occurrences(
            CronExpression.parse("10,35 2 * * *"),
            datetime.fromisoformat("2024-10-06T00:00:00+10:30"),
            "Australia/Lord_Howe",
            3,
            dst_gap="shift",
        )
        assert [(o.at.isoformat(), o.dst) for o in found] == [
            ("2024-10-06T02:35:00+11:00", None),
            ("2024-10-06T02:40:00+11:00", "shifted"),
            ("2024-10-07T02:10:00+11:00", None),
        ]

    def test_both_copies_in_instant_order(self) -> None:
        found = occurrences(
            CronExpression.parse("15,45 1 * * *"),
            datetime(2024, 11, 3, tzinfo=NY),
            NY,
            4,
            dst_overlap="both",
        )
        assert [(o.at.isoformat(), o.dst) for o in found] == [
            ("2024-11-03T01:15:00-04:00", "repeated"),
            ("2024-11-03T01:45:00-04:00", "repeated"),
            ("2024-11-03T01:15:00-05:00", "repeated"),
            ("2024-11-03T01:45:00-05:00", "repeated"),
        ]

    def test_first_is_marked_merged(self) -> None:
        found = occurrences(
            CronExpression.parse("30 1 * * *"), datetime(2024, 11, 3, tzinfo=NY), NY, 1
        )
        assert found[0].dst == "merged"

    def test_midnight_gap_in_sao_paulo(self) -> None:
        assert fires("0 0 * * *", "2018-11-03T12:00:00-03:00", 2, "America/Sao_Paulo") == [
            "2018-11-04T01:00:00-02:00",
            "2018-11-05T00:00:00-02:00",
        ]

    def test_six_fields_with_zero_seconds_are_fixed_time(self) -> None:
        assert fires("0 30 2 * * ?", "2027-03-13T00:00:00-05:00", 3, "America/New_York") == [
            "2027-03-13T02:30:00-05:00",
            "2027-03-14T03:00:00-04:00",
            "2027-03-15T02:30:00-04:00",
        ]

    def test_non_zero_seconds_follow_the_wall_clock(self) -> None:
        assert fires("33 30 2 * * *", "2027-03-13T12:00:00-05:00", 1, "America/New_York") == [
            "2027-03-15T02:30:33-04:00"
        ]


class TestWallClockJobs:
    def test_default_skips_times_that_do_not_exist(self) -> None:
        assert fires("*/20 2 * * *", "2024-03-10T00:00:00-05:00", 2, "America/New_York") == [
            "2024-03-11T02:00:00-04:00",
            "2024-03-11T02:20:00-04:00",
        ]

    def test_explicit_skip_is_the_same(self) -> None:
        assert fires(
            "*/20 2 * * *", "2024-03-10T00:00:00-05:00", 1, "America/New_York", dst_gap="skip"
        ) == ["2024-03-11T02:00:00-04:00"]

    def test_explicit_shift_applies(self) -> None:
        assert fires(
            "*/20 2 * * *", "2024-03-10T00:00:00-05:00", 4, "America/New_York", dst_gap="shift"
        ) == [
            "2024-03-10T03:00:00-04:00",
            "2024-03-10T03:20:00-04:00",
            "2024-03-10T03:40:00-04:00",
            "2024-03-11T02:00:00-04:00",
        ]

    def test_shift_of_an_hourly_job_lands_on_regular_times(self) -> None:
        assert fires(
            "0 * * * *", "2024-03-10T01:30:00-05:00", 2, "America/New_York", dst_gap="shift"
        ) == [
            "2024-03-10T03:00:00-04:00",
            "2024-03-10T04:00:00-04:00",
        ]

    @pytest.mark.parametrize("overlap", ["first", "both"])
    def test_default_and_both_fire_in_both_copies(self, overlap: str) -> None:
        assert fires(
            "*/30 1 * * *", "2024-11-03T00:00:00-04:00", 4, "America/New_York", dst_overlap=overlap
        ) == [
            "2024-11-03T01:00:00-04:00",
            "2024-11-03T01:30:00-04:00",
            "2024-11-03T01:00:00-05:00",
            "2024-11-03T01:30:00-05:00",
        ]

    def test_explicit_last_fires_in_the_second_copy_only(self) -> None:
        assert fires(
            "*/30 1 * * *", "2024-11-03T00:00:00-04:00", 3, "America/New_York", dst_overlap="last"
        ) == [
            "2024-11-03T01:00:00-05:00",
            "2024-11-03T01:30:00-05:00",
            "2024-11-04T01:00:00-05:00",
        ]


class TestStart:
    def test_fold_1_start_is_the_second_copy(self) -> None:
        second = datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NY)
        first = datetime(2024, 11, 3, 1, 30, fold=0, tzinfo=NY)
        assert [
            d.isoformat() for d in next_times("*/15 * * * *", "America/New_York", second, 1)
        ] == ["2024-11-03T01:45:00-05:00"]
        assert [
            d.isoformat() for d in next_times("*/15 * * * *", "America/New_York", first, 1)
        ] == ["2024-11-03T01:45:00-04:00"]

    def test_start_in_another_zone_or_offset(self) -> None:
        utc_start = datetime(2024, 3, 10, 6, 0, tzinfo=UTC)  # 01:00 EST
        found = next_times("30 2 * * *", "America/New_York", utc_start, 1)
        assert found[0].tzinfo is NY
        assert found[0].isoformat() == "2024-03-10T03:00:00-04:00"
        fixed = datetime(2024, 11, 3, 1, 40, tzinfo=timezone(timedelta(hours=-5)))  # 2nd 01:40
        assert next_times("*/15 * * * *", "America/New_York", fixed, 1)[0].isoformat() == (
            "2024-11-03T01:45:00-05:00"
        )
        tokyo = datetime(2024, 11, 3, 14, 40, tzinfo=ZoneInfo("Asia/Tokyo"))  # 05:40Z, 1st 01:40
        assert next_times("*/15 * * * *", "America/New_York", tokyo, 1)[0].isoformat() == (
            "2024-11-03T01:45:00-04:00"
        )

    def test_start_at_a_wall_time_that_does_not_exist(self) -> None:
        # zoneinfo reads 02:30 (fold=0) with the offset before the gap: 07:30Z = 03:30 EDT.
        start = datetime(2024, 3, 10, 2, 30, tzinfo=NY)
        assert next_times("*/15 * * * *", "America/New_York", start, 1)[0].isoformat() == (
            "2024-03-10T03:45:00-04:00"
        )

    def test_results_are_strictly_increasing_across_a_year(self) -> None:
        found = next_times(
            "*/30 0-3 * * *", "Australia/Lord_Howe", datetime(2024, 1, 1, tzinfo=UTC), 3000
        )
        instants = [f.timestamp() for f in found]
        assert instants == sorted(set(instants))
