"""Schedules in words: a broad table over both dialects and every kind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cronwheel.errors import InvalidInput
from cronwheel.schedule import CronExpression, schedule_from_dict
from cronwheel.schedule.words import describe, describe_expression, ordinal

PARIS_DEFAULT = (
    "a wall time skipped by DST fires when the gap ends; a repeated one fires once, the first time"
)
WALL_CLOCK = "a wall time skipped by DST does not fire; a repeated one fires both times"


def cron(expression: str, dialect: str = "standard", **more: Any) -> dict[str, Any]:
    return {"kind": "cron", "cron": expression, "dialect": dialect, **more}


TABLE: list[tuple[dict[str, Any], str]] = [
    # standard dialect
    (
        cron("30 2 * * *", timezone="Europe/Paris"),
        f"At 02:30, every day, in Europe/Paris ({PARIS_DEFAULT})",
    ),
    (cron("*/5 * * * 1-5"), "Every 5 minutes, Monday through Friday, in UTC"),
    (cron("0 9 1 * *"), "At 09:00, on day 1 of the month, in UTC"),
    (cron("* * * * *"), "Every minute, in UTC"),
    (cron("*/7 * * * *"), "Every 7 minutes from minute 0 through 56, in UTC"),
    (cron("10-40/10 * * * *"), "Every 10 minutes from minute 10 through 40, in UTC"),
    (cron("0-29 * * * *"), "Every minute from minute 0 through 29, in UTC"),
    (cron("0 * * * *"), "At minute 0 of every hour, in UTC"),
    (cron("0 */2 * * *"), "Every 2 hours at minute 0, in UTC"),
    (cron("15 */5 * * *"), "At 00:15, 05:15, 10:15, 15:15 and 20:15, every day, in UTC"),
    (cron("0 9,17 * * *"), "At 09:00 and 17:00, every day, in UTC"),
    (
        cron("*/15 9-17 * * MON-FRI"),
        "Every 15 minutes, between 09:00 and 17:59, Monday through Friday, in UTC",
    ),
    (cron("*/5 9 * * *"), "Every 5 minutes, between 09:00 and 09:59, in UTC"),
    (
        cron("1,2,3,5,8,13 4,20 * * *"),
        "At minutes 1 through 3, 5, 8 and 13, during the hours starting at 04:00 and 20:00, in UTC",
    ),
    (cron("0 0 1 * MON"), "At 00:00, on day 1 of the month, and also every Monday, in UTC"),
    (
        cron("0 0 1-7 * */7"),
        "At 00:00, on days 1 through 7 of the month, if that day is Sunday, in UTC",
    ),
    (
        cron("0 0 */2 * 1,3"),
        "At 00:00, on every 2nd day of the month from day 1 through 31, if that day is Monday"
        " or Wednesday, in UTC",
    ),
    (cron("0 0 1,15 * *"), "At 00:00, on days 1 and 15 of the month, in UTC"),
    (cron("0 12 * * 5L"), "At 12:00, on the last Friday of the month, in UTC"),
    (cron("0 12 * * 1#2"), "At 12:00, on the second Monday of the month, in UTC"),
    (cron("0 8 * * 1,4"), "At 08:00, on Monday and Thursday, in UTC"),
    (cron("0 8 * 3-6 *"), "At 08:00, every day, from March through June, in UTC"),
    (cron("0 8 * 1,7 *"), "At 08:00, every day, in January and July, in UTC"),
    (cron("0 0 25 12 *"), "At 00:00, on December 25, in UTC"),
    (cron("0 30 9 * * * *"), "At 09:30, every day, in UTC"),  # 7 fields, seconds first
    (cron("15 30 9 * * *"), "At 09:30:15, every day, in UTC"),
    (cron("0 0 12 * * * 2027-2030"), "At 12:00, every day, in 2027 through 2030, in UTC"),
    # macros
    (cron("@daily"), "At 00:00, every day, in UTC"),
    (cron("@midnight"), "At 00:00, every day, in UTC"),
    (cron("@hourly"), "At minute 0 of every hour, in UTC"),
    (cron("@weekly"), "At 00:00, every Sunday, in UTC"),
    (cron("@monthly"), "At 00:00, on day 1 of the month, in UTC"),
    (cron("@yearly"), "At 00:00, on January 1, in UTC"),
    (cron("@every 1h30m", timezone="Europe/Paris"), "Every 1 hour 30 minutes"),
    (cron("@every 5m"), "Every 5 minutes"),
    (cron("@every 1h"), "Every hour"),
    # quartz dialect
    (cron("0 15 10 L * ?", "quartz"), "At 10:15, on the last day of the month, in UTC"),
    (cron("0 15 10 ? * 6L", "quartz"), "At 10:15, on the last Friday of the month, in UTC"),
    (cron("0 15 10 ? * 6#3", "quartz"), "At 10:15, on the third Friday of the month, in UTC"),
    (
        cron("0 0 12 15W * ?", "quartz"),
        "At 12:00, on the weekday nearest day 15 of the month, in UTC",
    ),
    (cron("0 0 12 LW * ?", "quartz"), "At 12:00, on the last weekday of the month, in UTC"),
    (cron("0 0 12 L-3 * ?", "quartz"), "At 12:00, 3 days before the last day of the month, in UTC"),
    (cron("0 0 12 ? * L", "quartz"), "At 12:00, every Saturday, in UTC"),
    (cron("0 0 12 ? * MON-FRI", "quartz"), "At 12:00, Monday through Friday, in UTC"),
    (cron("*/10 * * * * ?", "quartz"), "Every 10 seconds, in UTC"),
    (cron("0/15 * * * * ?", "quartz"), "Every 15 seconds, in UTC"),
    (cron("* * * * * ?", "quartz"), "Every second, in UTC"),
    (cron("*/10 30 9 * * ?", "quartz"), "Every 10 seconds, during 09:30, in UTC"),
    (cron("30 * * * * ?", "quartz"), "At second 30 of every minute, in UTC"),
    (cron("15 */5 * * * ?", "quartz"), "At second 15, every 5 minutes, in UTC"),
    (
        cron("*/10 */5 * * * ?", "quartz"),
        "Every 10 seconds, during minutes 0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50 and 55, in UTC",
    ),
    (
        cron("*/10 * 9 * * ?", "quartz"),
        "Every 10 seconds, between 09:00 and 09:59, in UTC",
    ),
    (
        cron("30 * 9,18 * * ?", "quartz"),
        "At second 30 of every minute, during the hours starting at 09:00 and 18:00, in UTC",
    ),
    (
        cron("0 0-20/2 * * *"),  # every 2 hours, but not all day long: the times, listed
        "At 00:00, 02:00, 04:00, 06:00, 08:00, 10:00, 12:00, 14:00, 16:00, 18:00 and 20:00, in UTC",
    ),
    (
        cron("0 */3 * * *"),
        "At 00:00, 03:00, 06:00, 09:00, 12:00, 15:00, 18:00 and 21:00, every day, in UTC",
    ),
    (
        cron("0 0 9 ? JAN,APR,JUL,OCT MON", "quartz"),
        "At 09:00, every Monday, in January, April, July and October, in UTC",
    ),
    (
        cron("0 0 22-2 * * ?", "quartz"),
        "At 00:00, 01:00, 02:00, 22:00 and 23:00, every day, in UTC",
    ),
    # the DST policies
    (
        cron("0 * * * *", timezone="America/New_York"),
        f"At minute 0 of every hour, in America/New_York ({WALL_CLOCK})",
    ),
    (
        cron("30 2 * * *", timezone="Europe/Paris", dst_gap="skip", dst_overlap="last"),
        "At 02:30, every day, in Europe/Paris (a wall time skipped by DST does not fire;"
        " a repeated one fires once, the second time)",
    ),
    (
        cron("30 2 * * *", timezone="Europe/Paris", dst_gap="shift", dst_overlap="both"),
        "At 02:30, every day, in Europe/Paris (a wall time skipped by DST fires with the"
        " offset before the change, e.g. 02:30 at 03:30; a repeated one fires both times)",
    ),
    (cron("30 2 * * *", timezone="Etc/GMT+5"), "At 02:30, every day, in Etc/GMT+5"),
    # bounds
    (
        cron("5 4 * * SUN", start_at="2027-03-01T00:00:00Z", end_at="2027-04-01T00:00:00Z"),
        "At 04:05, every Sunday, in UTC, from 2027-03-01 00:00 UTC until 2027-04-01 00:00 UTC",
    ),
    (
        cron("5 4 * * *", end_at="2027-04-01T12:30:15+02:00"),
        "At 04:05, every day, in UTC, until 2027-04-01 10:30:15 UTC",
    ),
    # other kinds
    ({"kind": "interval", "every_seconds": 300}, "Every 5 minutes"),
    ({"kind": "interval", "every_seconds": 1.5}, "Every 1.5 seconds"),
    ({"kind": "interval", "every_seconds": 5400}, "Every 1 hour 30 minutes"),
    (
        {"kind": "interval", "every_seconds": 60, "anchor": "2027-01-01T00:00:00Z"},
        "Every minute, counted from 2027-01-01 00:00 UTC",
    ),
    (
        {"kind": "interval", "every_seconds": 86400, "start_at": "2027-01-01T00:00:00Z"},
        "Every day, not before 2027-01-01 00:00 UTC",
    ),
    ({"kind": "once", "at": "2027-01-01T09:00:00+01:00"}, "Once, at 2027-01-01 08:00 UTC"),
    ({"kind": "delay", "seconds": 90}, "Once, 1 minute 30 seconds after the job is created"),
    ({"kind": "delay", "seconds": 1}, "Once, 1 second after the job is created"),
    ({"kind": "immediate"}, "Once, as soon as the job is created"),
    (
        {"kind": "manual"},
        "Never by itself: only when it is triggered or runs are enqueued to it",
    ),
]


@pytest.mark.parametrize(("schedule", "words"), TABLE, ids=[str(s) for s, _ in TABLE])
def test_a_schedule_in_words(schedule: dict[str, Any], words: str) -> None:
    assert describe(schedule_from_dict(schedule)) == words


def test_every_expression_of_the_corpus_has_words() -> None:
    """Whatever an expression holds, describing it never fails and says something."""
    corpus = Path(__file__).resolve().parent / "corpus" / "cases.jsonl"
    described = 0
    for line in corpus.read_text().splitlines():
        case = json.loads(line)
        dialect = "quartz" if "quartz" in case["dialect"] else "standard"
        try:
            expression = CronExpression.parse(case["expr"], dialect)
        except InvalidInput:
            continue  # the corpus also holds expressions that must be refused
        assert describe_expression(expression)
        described += 1
    assert described > 100


def test_ordinals() -> None:
    shown = {k: ordinal(k) for k in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111, 112, 10_001)}
    assert shown == {
        1: "1st",
        2: "2nd",
        3: "3rd",
        4: "4th",
        11: "11th",
        12: "12th",
        13: "13th",
        21: "21st",
        22: "22nd",
        23: "23rd",
        101: "101st",
        111: "111th",
        112: "112th",
        10_001: "10,001st",
    }
