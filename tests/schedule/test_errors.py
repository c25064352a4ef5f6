"""Bad input: a ValueError (cronwheel's InvalidInput) whose message names the field."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.errors import InvalidInput
from cronwheel.schedule import CronExpression, next_times, validate_cron

START = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expr", "dialect", "message"),
    [
        ("* * * * 8", "standard", "day-of-week: 8 is out of range 0-7"),
        ("* */0 * * *", "standard", "hour: step 0 is not allowed"),
        (
            "* * * *",
            "standard",
            "expression: expected 5, 6 or 7 fields for dialect standard, got 4",
        ),
        ("", "standard", "expression: expected 5, 6 or 7 fields for dialect standard, got 0"),
        ("* * * * * *", "quartz", "day-of-month, day-of-week: exactly one of them must be '?'"),
        ("0 0 12 ? * ?", "quartz", "day-of-month, day-of-week: exactly one of them must be '?'"),
        ("0 0 12 * *", "quartz", "expression: expected 6 or 7 fields for dialect quartz, got 5"),
        ("0 8 ? * ?", "standard", "day-of-month, day-of-week: only one of them may be '?'"),
        ("? * * * *", "standard", "minute: '?' is only allowed in day-of-month and day-of-week"),
        ("60 * * * *", "standard", "minute: 60 is out of range 0-59"),
        ("* 24 * * *", "standard", "hour: 24 is out of range 0-23"),
        ("* * 0 * *", "standard", "day-of-month: 0 is out of range 1-31"),
        ("* * * 13 *", "standard", "month: 13 is out of range 1-12"),
        ("* * * JANU *", "standard", "month: 'JANU' is not a number or a name (JAN-DEC)"),
        ("* * * * FUN", "standard", "day-of-week: 'FUN' is not a number or a name (SUN-SAT)"),
        ("a * * * *", "standard", "minute: 'a' is not a number"),
        ("¹ * * * *", "standard", "minute: '¹' is not a number"),
        ("1-1_0 * * * *", "standard", "minute: '1_0' is not a number"),
        ("0-10/ * * * *", "standard", "minute: step '' is not a positive integer"),
        ("/2 * * * *", "standard", "minute: a value is missing"),
        ("1,,2 * * * *", "standard", "minute: empty element in list"),
        ("* 22-2 * * *", "standard", "hour: range 22-2 runs backwards"),
        ("0 0 0 * * * 1969", "standard", "year: 1969 is out of range 1970-2199"),
        ("0 0 0 1 * * 2070#3", "standard", "year: '2070#3' is not a number"),
        ("* * * * 1#6", "standard", "day-of-week: #6: the week number must be within 1-5"),
        ("* * * * 1#0", "standard", "day-of-week: #0: the week number must be within 1-5"),
        ("* * * * MONL", "standard", "day-of-week: 'MONL': 'L' must follow a weekday number"),
        ("* * * * L", "standard", "day-of-week: 'L' alone is only meaningful in the quartz"),
        ("* * L-31 * *", "standard", "day-of-month: L-31: the offset must be within 1-30"),
        ("0/60 * * * * ?", "quartz", "second: step 60 is out of range 1-59"),
        ("0 0 12 ? * 0", "quartz", "day-of-week: 0 is out of range 1-7"),
        ("@daily", "quartz", "expression: @daily is only available in the standard dialect"),
        ("* * * * *", "cron", "dialect: unknown dialect 'cron' (expected standard or quartz)"),
    ],
)
def test_messages_name_the_field(expr: str, dialect: str, message: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        validate_cron(expr, dialect)
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, ValueError)


def test_unknown_timezone() -> None:
    with pytest.raises(ValueError, match=r"^timezone: unknown IANA zone 'Mars/Olympus'$"):
        next_times("* * * * *", "Mars/Olympus", START, 1)


@pytest.mark.parametrize("zone", ["", "America", "../etc/passwd", "/etc/localtime", "utc "])
def test_malformed_timezones(zone: str) -> None:
    with pytest.raises(ValueError, match=r"^timezone: unknown IANA zone"):
        next_times("* * * * *", zone, START, 1)


def test_naive_start() -> None:
    with pytest.raises(ValueError, match=r"^start: must be timezone-aware"):
        next_times("* * * * *", "UTC", datetime(2024, 1, 1), 1)


def test_policies_are_checked() -> None:
    with pytest.raises(ValueError, match=r"^dst_gap: unknown policy 'later'"):
        next_times("* * * * *", "UTC", START, 1, dst_gap="later")
    with pytest.raises(ValueError, match=r"^dst_overlap: unknown policy 'twice'"):
        next_times("* * * * *", "UTC", START, 1, dst_overlap="twice")
    with pytest.raises(ValueError, match=r"^dst_gap"):
        validate_cron("* * * * *", dst_gap="later")


def test_bad_count() -> None:
    with pytest.raises(ValueError, match=r"^count: "):
        next_times("* * * * *", "UTC", START, -1)


def test_expression_must_be_a_string() -> None:
    with pytest.raises(ValueError, match=r"^expression: expected a string"):
        CronExpression.parse(5)  # type: ignore[arg-type]
