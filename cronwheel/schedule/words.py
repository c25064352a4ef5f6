"""A schedule in words, for a person checking what they wrote: ``At 02:30, every day,
in Europe/Paris``, ``Every 5 minutes, Monday through Friday``.

Built from the parsed :class:`~.cron.CronExpression` (never from the text again), field by
field, so the words cannot say more than the fields do: a regular shape gets its usual
phrase (``every 15 minutes``, ``on the last Friday of the month``); anything else is
listed value by value, with runs of consecutive values as ranges. Wordy beats wrong.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import pairwise

from cronwheel.schedule.cron import CronExpression
from cronwheel.schedule.days import DomSpec, DowSpec
from cronwheel.schedule.kinds import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
)

WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
ORDINALS = ("first", "second", "third", "fourth", "fifth")
MAX_CLOCK_TIMES = 8
"""Up to this many fire times a day are listed as clock times (``At 09:00 and 17:30``)."""
# Zones without daylight saving time, whose DST policy never applies (as timezones.py).
_FIXED_ZONE = re.compile(r"(Etc/.*|UTC|UCT|GMT[+-]?0?|Universal|Zulu|Greenwich)")


def describe(schedule: Schedule) -> str:
    """``schedule`` in plain English: when it fires, in which zone, what DST does to it,
    and its ``start_at``/``end_at`` bounds."""
    if isinstance(schedule, ManualSchedule):
        return "Never by itself: only when it is triggered or runs are enqueued to it"
    if isinstance(schedule, ImmediateSchedule):
        text = "Once, as soon as the job is created"
    elif isinstance(schedule, OnceSchedule):
        text = f"Once, at {_instant(schedule.at)}"
    elif isinstance(schedule, DelaySchedule):
        text = f"Once, {_duration(schedule.seconds)} after the job is created"
    elif isinstance(schedule, IntervalSchedule):
        text = f"Every {_period(schedule.every_seconds)}"
        if schedule.anchor is not None:
            text += f", counted from {_instant(schedule.anchor)}"
    else:
        text = _cron(schedule)
    return text + _bounds(schedule.start_at, schedule.end_at)


def describe_expression(expression: CronExpression) -> str:
    """A cron expression in words, without a zone or DST policy."""
    if expression.every is not None:
        return f"Every {_period(expression.every)}"
    time, daily = _time(expression)
    parts = [time]
    days = _days(expression.dom, expression.dow)
    months = _months(expression.months)
    dates = _date(expression)
    if dates is not None:
        parts.append(dates)  # one day of one month: "on January 1"
        months = None
    elif days is not None:
        parts.append(days)
    elif daily:
        parts.append("every day")
    if months is not None:
        parts.append(months)
    if expression.years is not None:
        parts.append("in " + _listed([str(y) for y in expression.years], expression.years))
    return ", ".join(parts)


def _cron(schedule: CronSchedule) -> str:
    expression = schedule.expression
    if expression.every is not None:
        return describe_expression(expression)  # a fixed period: no zone, no DST
    text = f"{describe_expression(expression)}, in {schedule.timezone}"
    if _FIXED_ZONE.fullmatch(schedule.timezone) is None:
        text += f" ({_dst(schedule)})"
    return text


def _dst(schedule: CronSchedule) -> str:
    """What the DST policy does, as it applies to this expression: Debian cron's defaults
    only adjust fixed-time jobs; a wall-clock one follows the clock (occurrences.py)."""
    gap, overlap = schedule.dst_gap, schedule.dst_overlap
    if not schedule.expression.fixed_time:
        gap = "skip" if gap == "gap_end" else gap
        overlap = "both" if overlap == "first" else overlap
    gaps = {
        "gap_end": "a wall time skipped by DST fires when the gap ends",
        "skip": "a wall time skipped by DST does not fire",
        "shift": "a wall time skipped by DST fires with the offset before the change, "
        "e.g. 02:30 at 03:30",
    }
    overlaps = {
        "first": "a repeated one fires once, the first time",
        "last": "a repeated one fires once, the second time",
        "both": "a repeated one fires both times",
    }
    return f"{gaps[gap]}; {overlaps[overlap]}"


# -- time of day ---------------------------------------------------------------------------
def _time(e: CronExpression) -> tuple[str, bool]:
    """The time-of-day phrase, and whether it names clock times (fires once a day each)."""
    seconds, minutes, hours = e.seconds, e.minutes, e.hours
    if len(seconds) == 1 and len(minutes) * len(hours) <= MAX_CLOCK_TIMES:
        times = [_clock(h, m, seconds[0]) for h in hours for m in minutes]
        return "At " + _join(times), True
    if seconds == (0,):
        return _capital(_minutes_and_hours(minutes, hours)), False
    phrase = _every_or_at(seconds, "second", 0, 59)
    if _is_all(minutes, 0, 59):
        if not phrase.startswith("every"):
            phrase += " of every minute"
        return _capital(phrase + _hours_clause(hours)), False
    if len(seconds) == 1:
        rest = _minutes_and_hours(minutes, hours)
    elif len(minutes) == 1:
        # Several seconds of one minute: they fire during that minute, not at it.
        rest = _minutes_and_hours(minutes, hours).replace("at ", "during ", 1)
    else:
        listed = _listed([str(m) for m in minutes], minutes)
        rest = f"during minutes {listed}{_hours_clause(hours)}"
    return _capital(f"{phrase}, {rest}"), False


def _minutes_and_hours(minutes: tuple[int, ...], hours: tuple[int, ...]) -> str:
    if len(minutes) == 1:
        m = minutes[0]
        if _is_all(hours, 0, 23):
            return f"at minute {m} of every hour"
        step = _step(hours, 0, 23)
        if step is not None and hours[0] == 0 and 24 % step[0] == 0 and step[2] + step[0] > 23:
            return f"every {step[0]} hours at minute {m}"
        return "at " + _join([_clock(h, m) for h in hours])
    return _every_or_at(minutes, "minute", 0, 59) + _hours_clause(hours)


def _hours_clause(hours: tuple[int, ...]) -> str:
    """``, between 09:00 and 17:59`` (nothing for every hour)."""
    if _is_all(hours, 0, 23):
        return ""
    if _is_range(hours):
        return f", between {_clock(hours[0], 0)} and {_clock(hours[-1], 59)}"
    return ", during the hours starting at " + _join([_clock(h, 0) for h in hours])


def _every_or_at(values: tuple[int, ...], unit: str, low: int, high: int) -> str:
    """``every minute``, ``every 15 minutes``, ``every minute from 0 through 29``,
    ``at minutes 5, 10 and 40``."""
    span = high - low + 1
    if _is_all(values, low, high):
        return f"every {unit}"
    step = _step(values, low, high)
    if step is not None:
        k, first, last = step
        every = f"every {unit}" if k == 1 else f"every {k} {unit}s"
        if first == low and span % k == 0 and last + k > high:
            return every
        return f"{every} from {unit} {first} through {last}"
    if len(values) == 1:
        return f"at {unit} {values[0]}"
    return f"at {unit}s " + _listed([str(v) for v in values], values)


# -- days ----------------------------------------------------------------------------------
def _days(dom: DomSpec, dow: DowSpec) -> str | None:
    """The day phrase, or None for every day. Vixie's rule: the two fields join with AND
    when either starts with ``*`` (or is ``?``), otherwise with OR."""
    dom_all = not (dom.last_offsets or dom.nearest or dom.last_nearest) and _is_all(
        tuple(sorted(dom.values)), 1, 31
    )
    dow_all = not (dow.nth or dow.last) and _is_all(tuple(sorted(dow.weekdays)), 0, 6)
    joined_by_and = dom.star or dow.star
    if dom_all and dow_all:
        return None
    if joined_by_and:
        if dom_all:
            return _weekdays(dow)
        if dow_all:
            return _month_days(dom)
        return f"{_month_days(dom)}, if that day is {_weekdays(dow, bare=True)}"
    if dom_all or dow_all:
        return None  # every day OR something: every day
    return f"{_month_days(dom)}, and also {_weekdays(dow)}"


def _date(e: CronExpression) -> str | None:
    """``on January 1`` for one plain day of one month, every weekday allowed."""
    dom, dow = e.dom, e.dow
    plain = not (dom.last_offsets or dom.nearest or dom.last_nearest or dow.nth or dow.last)
    every_weekday = _is_all(tuple(sorted(dow.weekdays)), 0, 6)
    if plain and every_weekday and dow.star and len(e.months) == 1 and len(dom.values) == 1:
        [day] = dom.values
        return f"on {MONTHS[e.months[0] - 1]} {day}"
    return None


def _month_days(dom: DomSpec) -> str:
    pieces: list[str] = []
    values = tuple(sorted(dom.values))
    if values:
        step = _step(values, 1, 31)
        if len(values) == 1:
            pieces.append(f"on day {values[0]} of the month")
        elif step is not None and step[0] > 1:
            k, first, last = step
            pieces.append(f"on every {_nth(k)} day of the month from day {first} through {last}")
        else:
            pieces.append("on days " + _listed([str(v) for v in values], values) + " of the month")
    for n in sorted(dom.last_offsets):
        pieces.append(
            "on the last day of the month"
            if n == 0
            else f"{_plural(n, 'day')} before the last day of the month"
        )
    for day in sorted(dom.nearest):
        pieces.append(f"on the weekday nearest day {day} of the month")
    for n in sorted(dom.last_nearest):
        pieces.append(
            "on the last weekday of the month"
            if n == 0
            else f"on the weekday nearest {_plural(n, 'day')} before the last day of the month"
        )
    return _join(pieces, "and")


def _weekdays(dow: DowSpec, *, bare: bool = False) -> str:
    """``Monday through Friday``, ``on Monday and Thursday``, ``on the last Friday of the
    month``; ``bare`` drops the ``on`` (after ``if that day is``)."""
    pieces: list[str] = []
    days = tuple(sorted(dow.weekdays))
    if days:
        if len(days) >= 3 and _is_range(days):
            pieces.append(f"{WEEKDAYS[days[0]]} through {WEEKDAYS[days[-1]]}")
        else:
            named = _join([WEEKDAYS[d] for d in days], "or" if bare else "and")
            if bare:
                pieces.append(named)
            else:
                pieces.append(f"every {named}" if len(days) == 1 else f"on {named}")
    on = "" if bare else "on "
    for weekday, k in sorted(dow.nth):
        pieces.append(f"{on}the {ORDINALS[k - 1]} {WEEKDAYS[weekday]} of the month")
    for weekday in sorted(dow.last):
        pieces.append(f"{on}the last {WEEKDAYS[weekday]} of the month")
    return _join(pieces, "or" if bare else "and")


def _months(months: tuple[int, ...]) -> str | None:
    if _is_all(months, 1, 12):
        return None
    if len(months) >= 3 and _is_range(months):
        return f"from {MONTHS[months[0] - 1]} through {MONTHS[months[-1] - 1]}"
    return "in " + _join([MONTHS[m - 1] for m in months])


# -- shared phrasing -----------------------------------------------------------------------
def _is_all(values: Sequence[int], low: int, high: int) -> bool:
    return len(values) == high - low + 1 and values[0] == low and values[-1] == high


def _is_range(values: Sequence[int]) -> bool:
    return values[-1] - values[0] == len(values) - 1


def _step(values: Sequence[int], low: int, high: int) -> tuple[int, int, int] | None:
    """``(k, first, last)`` if the sorted ``values`` are ``first, first+k, …, last`` and
    at least three of them (two values are better listed), else None."""
    if len(values) < 3:
        return None
    k = values[1] - values[0]
    if any(b - a != k for a, b in pairwise(values)):
        return None
    return k, values[0], values[-1]


def _listed(texts: Sequence[str], values: Sequence[int]) -> str:
    """Values as a list in which three or more consecutive ones read as a range."""
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{texts[i]} through {texts[j]}")
            i = j + 1
        else:
            out.append(texts[i])
            i += 1
    return _join(out)


def _join(items: Sequence[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _clock(hour: int, minute: int, second: int = 0) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")


def ordinal(k: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``11th``, ``22nd``, ``10,001st``: a number as a rank,
    thousands separated."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k:,}{suffix}"


_nth = ordinal


def _plural(n: float, unit: str) -> str:
    number = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{number} {unit}" + ("" if n == 1 else "s")


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _duration(seconds: float) -> str:
    """``90`` -> ``1 minute 30 seconds``; a fraction of a second stays in seconds."""
    if seconds != int(seconds):
        return _plural(float(seconds), "second")
    rest = int(seconds)
    parts = []
    for unit, size in _UNITS:
        count, rest = divmod(rest, size)
        if count:
            parts.append(_plural(count, unit))
    return " ".join(parts)


def _period(seconds: float) -> str:
    """What follows ``Every``: ``minute``, ``5 minutes``, ``1 hour 30 minutes``."""
    for unit, size in _UNITS:
        if seconds == size:
            return unit
    return _duration(seconds)


def _instant(at: datetime) -> str:
    utc = at.astimezone(UTC)
    return f"{utc:%Y-%m-%d %H:%M}" + (f":{utc:%S}" if utc.second else "") + " UTC"


def _bounds(start_at: datetime | None, end_at: datetime | None) -> str:
    if start_at and end_at:
        return f", from {_instant(start_at)} until {_instant(end_at)}"
    if start_at:
        return f", not before {_instant(start_at)}"
    if end_at:
        return f", until {_instant(end_at)}"
    return ""


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
