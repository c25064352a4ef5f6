"""Retry-After as a webhook target sends it, read defensively (issue 29, item 10): delay
seconds in ASCII digits or an HTTP-date, bounded; anything else is no wish, and the
job's backoff decides."""

from __future__ import annotations

import email.utils

import pytest

from cronwheel.actions.webhook import MAX_RETRY_AFTER, parse_retry_after

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("604800", float(MAX_RETRY_AFTER)),
        ("604801", float(MAX_RETRY_AFTER)),
        ("9" * 400, float(MAX_RETRY_AFTER)),
        ("9" * 5000, float(MAX_RETRY_AFTER)),  # too long for int(): never converted
        (email.utils.formatdate(NOW + 90, usegmt=True), 90.0),
        (email.utils.formatdate(NOW - 90, usegmt=True), 0.0),  # in the past: now
        ("Fri, 31 Dec 9999 23:59:59 GMT", float(MAX_RETRY_AFTER)),
        ("Fri, 31 Dec 9999 23:59:59 -2359", float(MAX_RETRY_AFTER)),
    ],
)
def test_seconds_and_dates_are_read_within_bounds(value: str, seconds: float) -> None:
    assert parse_retry_after(value, NOW) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "\u00b2",  # superscript two: a digit to str.isdigit
        "\u0661\u0662",  # Arabic-Indic digits
        "\uff11\uff12",  # fullwidth digits
        "-1",
        "+5",
        "1.5",
        "1e3",
        "soon",
        "Fri, 31 Dec 99999999999999999999 23:59:59 GMT",  # OverflowError
        "Fri, 31 Dec 2030 23:59:59 +99999999999999999999",  # OverflowError
        "Fri, 31 Dec 10000 23:59:59 GMT",  # ValueError: year out of range
        "Fri, 99 Dec 2030 23:59:59 GMT",
        "Fri," + " " * 100 + "31 Dec 2030 23:59:59 GMT",  # not an HTTP-date: too long
        "x" * 10_000,
    ],
)
def test_what_cannot_be_read_is_no_wish_and_never_an_error(value: str | None) -> None:
    assert parse_retry_after(value, NOW) is None
