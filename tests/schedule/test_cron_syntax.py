"""The two dialects and every extension, one behaviour per test (UTC: no DST here)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.schedule import CronExpression, next_times, validate_cron
from tests.schedule.helpers import fires

JAN1 = "2024-01-01T00:00:00+00:00"  # a Monday


class TestStandardShapes:
    def test_five_fields(self) -> None:
        assert fires("*/15 * * * *", "2024-01-01T00:07:00+00:00") == [
            "2024-01-01T00:15:00+00:00",
            "2024-01-01T00:30:00+00:00",
            "2024-01-01T00:45:00+00:00",
        ]

    def test_six_fields_lead_with_seconds(self) -> None:
        assert fires("*/20 * * * * *", JAN1) == [
            "2024-01-01T00:00:20+00:00",
            "2024-01-01T00:00:40+00:00",
            "2024-01-01T00:01:00+00:00",
        ]

    def test_seven_fields_end_with_a_year(self) -> None:
        assert fires("0 0 12 1 1 * 2030", JAN1) == ["2030-01-01T12:00:00+00:00"]

    def test_a_year_range_that_ends_stops_firing(self) -> None:
        assert fires("0 0 0 1 1 * 2025-2026", JAN1, 5) == [
            "2025-01-01T00:00:00+00:00",
            "2026-01-01T00:00:00+00:00",
        ]

    def test_question_mark_in_day_of_week(self) -> None:
        assert fires("0 30 2 * * ?", JAN1, 2) == [
            "2024-01-01T02:30:00+00:00",
            "2024-01-02T02:30:00+00:00",
        ]

    def test_question_mark_in_day_of_month(self) -> None:
        assert fires("0 0 ? * MON", JAN1, 2) == [
            "2024-01-08T00:00:00+00:00",
            "2024-01-15T00:00:00+00:00",
        ]


class TestValuesRangesSteps:
    @pytest.mark.parametrize("sunday", ["0", "7", "SUN", "sun"])
    def test_sunday_is_0_or_7(self, sunday: str) -> None:
        assert fires(f"0 0 * * {sunday}", JAN1, 2) == [
            "2024-01-07T00:00:00+00:00",
            "2024-01-14T00:00:00+00:00",
        ]

    def test_star_step_on_weekdays_counts_sunday_once(self) -> None:
        assert fires("0 0 * * */2", JAN1, 4) == [
            "2024-01-02T00:00:00+00:00",  # Tue
            "2024-01-04T00:00:00+00:00",  # Thu
            "2024-01-06T00:00:00+00:00",  # Sat
            "2024-01-07T00:00:00+00:00",  # Sun
        ]

    def test_range_up_to_7(self) -> None:
        assert fires("0 0 * * sat-7", JAN1, 3) == [
            "2024-01-06T00:00:00+00:00",
            "2024-01-07T00:00:00+00:00",
            "2024-01-13T00:00:00+00:00",
        ]

    def test_names_are_case_insensitive_in_lists_and_ranges(self) -> None:
        assert fires("0 9 * * Mon-fri", "2024-01-05T10:00:00+00:00") == [
            "2024-01-08T09:00:00+00:00",
            "2024-01-09T09:00:00+00:00",
            "2024-01-10T09:00:00+00:00",
        ]
        assert fires("0 0 1 jan-MAR *", "2023-12-31T00:00:00+00:00", 4) == [
            "2024-01-01T00:00:00+00:00",
            "2024-02-01T00:00:00+00:00",
            "2024-03-01T00:00:00+00:00",
            "2025-01-01T00:00:00+00:00",
        ]

    def test_range_step(self) -> None:
        assert fires("10-50/20 * * * *", JAN1) == [
            "2024-01-01T00:10:00+00:00",
            "2024-01-01T00:30:00+00:00",
            "2024-01-01T00:50:00+00:00",
        ]

    def test_start_step_runs_to_the_top_of_the_field(self) -> None:
        assert fires("5/15 * * * *", JAN1, 5)[-2:] == [
            "2024-01-01T00:50:00+00:00",
            "2024-01-01T01:05:00+00:00",
        ]

    def test_big_steps_are_allowed_in_standard(self) -> None:
        # '*/100' is the classic trick to make day-of-month "start with *".
        assert fires("0 0 */100 * MON", JAN1, 2) == [
            "2024-04-01T00:00:00+00:00",
            "2024-07-01T00:00:00+00:00",
        ]

    def test_lists(self) -> None:
        assert fires("0 8,12,18 * * *", JAN1) == [
            "2024-01-01T08:00:00+00:00",
            "2024-01-01T12:00:00+00:00",
            "2024-01-01T18:00:00+00:00",
        ]


class TestDayOfMonthAndWeek:
    def test_both_restricted_means_either(self) -> None:
        assert fires("0 0 13 * FRI", "2024-09-01T00:00:00+00:00", 5) == [
            "2024-09-06T00:00:00+00:00",
            "2024-09-13T00:00:00+00:00",
            "2024-09-20T00:00:00+00:00",
            "2024-09-27T00:00:00+00:00",
            "2024-10-04T00:00:00+00:00",
        ]

    def test_a_starred_field_means_both(self) -> None:
        # '*/2' starts with '*': odd days that are also Fridays.
        assert fires("0 0 */2 * FRI", "2024-09-01T00:00:00+00:00") == [
            "2024-09-13T00:00:00+00:00",
            "2024-09-27T00:00:00+00:00",
            "2024-10-11T00:00:00+00:00",
        ]

    def test_question_mark_counts_as_unrestricted(self) -> None:
        assert fires("0 0 0 13 * ?", "2024-09-01T00:00:00+00:00", 2) == [
            "2024-09-13T00:00:00+00:00",
            "2024-10-13T00:00:00+00:00",
        ]

    def test_never_firing_expressions_return_nothing(self) -> None:
        assert fires("0 0 30 2 *", JAN1) == []
        assert fires("0 0 31 4,6,9,11 *", JAN1) == []

    def test_rare_expressions_are_found(self) -> None:
        # The fifth Monday of February: a Feb 29 that is a Monday.
        assert fires("0 0 * 2 MON#5", JAN1, 2) == [
            "2044-02-29T00:00:00+00:00",
            "2072-02-29T00:00:00+00:00",
        ]


class TestExtensions:
    def test_last_day_of_month(self) -> None:
        assert fires("0 0 L * *", "2024-01-31T00:00:00+00:00") == [
            "2024-02-29T00:00:00+00:00",
            "2024-03-31T00:00:00+00:00",
            "2024-04-30T00:00:00+00:00",
        ]

    def test_days_before_the_last(self) -> None:
        assert fires("0 0 L-2 * *", JAN1) == [
            "2024-01-29T00:00:00+00:00",
            "2024-02-27T00:00:00+00:00",
            "2024-03-29T00:00:00+00:00",
        ]

    def test_nearest_weekday(self) -> None:
        # 2024-06-15 is a Saturday (-> Fri 14), 2024-09-15 a Sunday (-> Mon 16).
        assert fires("0 0 15W 6,9 *", JAN1, 2) == [
            "2024-06-14T00:00:00+00:00",
            "2024-09-16T00:00:00+00:00",
        ]

    def test_nearest_weekday_never_leaves_the_month(self) -> None:
        # 2024-06-01 is a Saturday: Monday the 3rd, not Friday May 31.
        assert fires("0 0 1W 6 *", JAN1, 1) == ["2024-06-03T00:00:00+00:00"]
        # 2024-08-31 is a Saturday: Friday the 30th; 31W skips 30-day months.
        assert fires("0 0 31W 8,9 *", JAN1, 2) == [
            "2024-08-30T00:00:00+00:00",
            "2025-08-29T00:00:00+00:00",
        ]

    def test_last_weekday_of_month(self) -> None:
        # 2024-03-31 is a Sunday, 2024-08-31 a Saturday.
        assert fires("0 0 LW 3,8 *", JAN1, 2) == [
            "2024-03-29T00:00:00+00:00",
            "2024-08-30T00:00:00+00:00",
        ]

    def test_nth_weekday(self) -> None:
        assert fires("0 0 * * 1#1", JAN1) == [
            "2024-02-05T00:00:00+00:00",
            "2024-03-04T00:00:00+00:00",
            "2024-04-01T00:00:00+00:00",
        ]
        assert fires("0 0 * * fri#5", JAN1) == [
            "2024-03-29T00:00:00+00:00",
            "2024-05-31T00:00:00+00:00",
            "2024-08-30T00:00:00+00:00",
        ]

    def test_last_weekday_n(self) -> None:
        assert fires("0 0 * * 5L", JAN1) == [
            "2024-01-26T00:00:00+00:00",
            "2024-02-23T00:00:00+00:00",
            "2024-03-29T00:00:00+00:00",
        ]

    def test_specials_in_lists(self) -> None:
        assert fires("0 0 1,L * *", "2024-02-01T00:00:00+00:00") == [
            "2024-02-29T00:00:00+00:00",
            "2024-03-01T00:00:00+00:00",
            "2024-03-31T00:00:00+00:00",
        ]


class TestMacros:
    @pytest.mark.parametrize(
        ("macro", "first"),
        [
            ("@yearly", "2025-01-01T00:00:00+00:00"),
            ("@annually", "2025-01-01T00:00:00+00:00"),
            ("@monthly", "2024-02-01T00:00:00+00:00"),
            ("@weekly", "2024-01-07T00:00:00+00:00"),
            ("@daily", "2024-01-02T00:00:00+00:00"),
            ("@midnight", "2024-01-02T00:00:00+00:00"),
            ("@HOURLY", "2024-01-01T01:00:00+00:00"),
        ],
    )
    def test_macros(self, macro: str, first: str) -> None:
        assert fires(macro, JAN1, 1) == [first]

    def test_every_is_relative_to_start(self) -> None:
        assert fires("@every 90s", "2024-01-01T00:00:00.5+00:00", 2) == [
            "2024-01-01T00:01:30.500000+00:00",
            "2024-01-01T00:03:00.500000+00:00",
        ]
        assert fires("@every 1h30m", JAN1, 1) == ["2024-01-01T01:30:00+00:00"]

    def test_every_ignores_dst(self) -> None:
        # Elapsed time, not wall time: across the New York gap the wall clock jumps.
        assert fires("@every 1h", "2024-03-10T01:30:00-05:00", 2, "America/New_York") == [
            "2024-03-10T03:30:00-04:00",
            "2024-03-10T04:30:00-04:00",
        ]

    @pytest.mark.parametrize("bad", ["@every", "@every 0s", "@every 5x", "@every 1m1h"])
    def test_bad_every(self, bad: str) -> None:
        with pytest.raises(ValueError, match=r"^expression: @every"):
            validate_cron(bad)

    def test_unknown_macro(self) -> None:
        with pytest.raises(ValueError, match=r"^expression: unknown macro '@reboot'"):
            validate_cron("@reboot")


class TestQuartz:
    def q(self, expr: str, start: str = JAN1, count: int = 3) -> list[str]:
        return fires(expr, start, count, dialect="quartz")

    def test_weekdays_are_1_to_7_from_sunday(self) -> None:
        assert self.q("0 0 12 ? * 1", count=1) == ["2024-01-07T12:00:00+00:00"]
        assert self.q("0 0 12 ? * 7", count=1) == ["2024-01-06T12:00:00+00:00"]
        assert self.q("0 0 12 ? * SUN", count=1) == ["2024-01-07T12:00:00+00:00"]

    def test_l_alone_in_day_of_week_is_saturday(self) -> None:
        assert self.q("0 0 12 ? * L", count=1) == ["2024-01-06T12:00:00+00:00"]

    def test_last_and_nth_weekday(self) -> None:
        assert self.q("0 15 10 ? * 6L", count=1) == ["2024-01-26T10:15:00+00:00"]
        assert self.q("0 15 10 ? * FRIL", count=1) == ["2024-01-26T10:15:00+00:00"]
        assert self.q("0 15 10 ? * 6#3", count=1) == ["2024-01-19T10:15:00+00:00"]

    def test_year_field(self) -> None:
        assert self.q("0 15 10 L-3W * ? 2024", count=2) == [
            "2024-01-29T10:15:00+00:00",  # Jan 28 is a Sunday -> Monday 29
            "2024-02-26T10:15:00+00:00",
        ]

    def test_wrap_around_ranges(self) -> None:
        assert self.q("0 0 22-1 * * ?", count=4) == [
            "2024-01-01T01:00:00+00:00",
            "2024-01-01T22:00:00+00:00",
            "2024-01-01T23:00:00+00:00",
            "2024-01-02T00:00:00+00:00",
        ]
        assert self.q("0 0 12 ? * FRI-MON", count=4) == [
            "2024-01-01T12:00:00+00:00",
            "2024-01-05T12:00:00+00:00",
            "2024-01-06T12:00:00+00:00",
            "2024-01-07T12:00:00+00:00",
        ]

    def test_bare_step(self) -> None:
        assert self.q("0 /20 * * * ?") == [
            "2024-01-01T00:20:00+00:00",
            "2024-01-01T00:40:00+00:00",
            "2024-01-01T01:00:00+00:00",
        ]


class TestParsedExpression:
    def test_parse_is_cached_and_reusable(self) -> None:
        expr = CronExpression.parse("0 9 * * MON-FRI")
        assert CronExpression.parse("0 9 * * MON-FRI") is expr
        friday = datetime(2024, 1, 5, 9, tzinfo=UTC)
        assert expr.next_after(friday) == datetime(2024, 1, 8, 9, tzinfo=UTC)

    def test_fixed_time(self) -> None:
        assert CronExpression.parse("30 2 * * *").fixed_time
        assert CronExpression.parse("0 30 2 * * *").fixed_time
        assert CronExpression.parse("0-5 1-3/2 * * *").fixed_time
        assert not CronExpression.parse("*/5 2 * * *").fixed_time
        assert not CronExpression.parse("30 * * * *").fixed_time
        assert not CronExpression.parse("@hourly").fixed_time
        # A non-zero seconds field: not a Debian cron line, so no Debian adjustments.
        assert not CronExpression.parse("33 30 2 * * *").fixed_time

    def test_matches(self) -> None:
        expr = CronExpression.parse("0 0 L * *")
        assert expr.matches(datetime(2024, 2, 29))
        assert not expr.matches(datetime(2024, 2, 28))

    def test_count_zero_and_after_end_of_expression(self) -> None:
        assert next_times("* * * * *", "UTC", datetime(2024, 1, 1, tzinfo=UTC), 0) == []

    def test_start_is_exclusive_and_may_have_microseconds(self) -> None:
        assert fires("0 10 * * *", "2018-01-02T10:00:00+00:00", 1) == ["2018-01-03T10:00:00+00:00"]
        assert fires("0 10 * * *", "2018-01-02T09:59:59.999999+00:00", 1) == [
            "2018-01-02T10:00:00+00:00"
        ]
