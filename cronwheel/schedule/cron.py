"""Parsing a cron expression into field sets, and the calendar search over local wall time.

This module knows nothing about timezones: :meth:`CronExpression.next_wall` works on
"local seconds" (a wall-clock reading counted like a POSIX timestamp, as if the zone
were UTC). :mod:`.occurrences` turns wall times into instants under a DST policy.
"""

from __future__ import annotations

import calendar
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from datetime import date, datetime, tzinfo
from functools import lru_cache

from cronwheel.errors import InvalidInput
from cronwheel.schedule.days import DomSpec, DowSpec, month_days, parse_dom, parse_dow
from cronwheel.schedule.dialects import (
    MACROS,
    QUARTZ,
    STANDARD,
    Dialect,
    DialectFields,
    check_dialect,
    parse_every,
)
from cronwheel.schedule.fields import parse_values

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_DAY = 86400
# The search stops here so that converting a result to an aware datetime cannot overflow.
_LAST_YEAR = 9998
# Past this many fruitless years, check once whether the expression can fire at all.
_SUSPICIOUS_YEARS = 8


def _next_in(values: tuple[int, ...], value: int) -> int | None:
    """The smallest of the sorted ``values`` that is >= ``value``, if any."""
    i = bisect_left(values, value)
    return values[i] if i < len(values) else None


@lru_cache(maxsize=65536)
def _month_shape(year: int, month: int) -> tuple[int, int]:
    """(number of days, weekday of the 1st counted from Sunday = 0)."""
    monday_based, length = calendar.monthrange(year, month)
    return length, (monday_based + 1) % 7


@dataclass(frozen=True)
class CronExpression:
    """A parsed cron expression: parse once, then step through occurrences cheaply.

    Build it with :meth:`parse`. ``every`` is set (in seconds) for ``@every`` expressions,
    which have no calendar fields. ``fixed_time`` says whether Debian cron's DST
    adjustments apply by default (see :mod:`.occurrences`).
    """

    source: str
    dialect: Dialect
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    years: tuple[int, ...] | None
    dom: DomSpec
    dow: DowSpec
    fixed_time: bool
    every: int | None = None
    _days: dict[tuple[int, int], tuple[int, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    @classmethod
    def parse(cls, expression: str, dialect: str = "standard") -> CronExpression:
        """Parse ``expression`` in ``dialect``; raise ``InvalidInput`` (a ``ValueError``)
        naming the field and the reason. Results are cached: parsing twice is free."""
        if not isinstance(expression, str):
            raise InvalidInput("expression", "expected a string")
        return _parse_cached(expression, check_dialect(dialect))

    def next_after(
        self,
        dt: datetime,
        tz: str | tzinfo = "UTC",
        *,
        dst_gap: str = "gap_end",
        dst_overlap: str = "first",
    ) -> datetime | None:
        """The first occurrence strictly after the aware ``dt``, in zone ``tz``."""
        # Imported here: occurrences builds on this module.
        from cronwheel.schedule.occurrences import next_occurrence

        found = next_occurrence(self, dt, tz, dst_gap=dst_gap, dst_overlap=dst_overlap)
        return None if found is None else found.at

    def matches(self, wall: datetime) -> bool:
        """Whether the local wall time ``wall`` (its tzinfo is ignored) matches the fields."""
        if self.every is not None:
            raise ValueError("@every expressions have no calendar fields to match")
        if self.years is not None and wall.year not in self.years:
            return False
        return (
            wall.month in self.months
            and wall.day in self.days_of(wall.year, wall.month)
            and wall.hour in self.hours
            and wall.minute in self.minutes
            and wall.second in self.seconds
        )

    def days_of(self, year: int, month: int) -> tuple[int, ...]:
        """The sorted days of ``year``-``month`` that match day-of-month/day-of-week."""
        shape = _month_shape(year, month)
        days = self._days.get(shape)
        if days is None:
            days = self._days[shape] = month_days(self.dom, self.dow, *shape)
        return days

    def next_wall(self, local: int) -> int | None:
        """The first matching wall time >= ``local`` (both in local seconds), if any."""
        days, rem = divmod(local, _DAY)
        ordinal = days + _EPOCH_ORDINAL
        if ordinal < 1:
            ordinal, rem = 1, 0
        elif ordinal > date(_LAST_YEAR, 12, 31).toordinal():
            return None
        d = date.fromordinal(ordinal)
        hit = self._search(d.year, d.month, d.day, rem // 3600, rem // 60 % 60, rem % 60)
        if hit is None:
            return None
        y, mo, dd, h, mi, s = hit
        return (date(y, mo, dd).toordinal() - _EPOCH_ORDINAL) * _DAY + h * 3600 + mi * 60 + s

    def _search(
        self, y: int, mo: int, d: int, h: int, mi: int, s: int
    ) -> tuple[int, int, int, int, int, int] | None:
        # An odometer: find the first value >= the current one in each field, from the
        # year down; when a field overflows, bump the next larger one and reset the rest.
        start_year = y
        while True:
            year = self._next_year(y, start_year)
            if year is None:
                return None
            if year != y:
                y, mo, d, h, mi, s = year, 1, 1, 0, 0, 0
            month = _next_in(self.months, mo)
            if month is None:
                y, mo, d, h, mi, s = y + 1, 1, 1, 0, 0, 0
                continue
            if month != mo:
                mo, d, h, mi, s = month, 1, 0, 0, 0
            day = _next_in(self.days_of(y, mo), d)
            if day is None:
                y, mo, d, h, mi, s = (y + 1, 1, 1, 0, 0, 0) if mo == 12 else (y, mo + 1, 1, 0, 0, 0)
                continue
            if day != d:
                d, h, mi, s = day, 0, 0, 0
            found = self._search_time(h, mi, s)
            if found is not None:
                return (y, mo, d, *found)
            d, h, mi, s = d + 1, 0, 0, 0

    def _search_time(self, h: int, mi: int, s: int) -> tuple[int, int, int] | None:
        """The first matching time of day >= h:mi:s, if any."""
        while True:
            hour = _next_in(self.hours, h)
            if hour is None:
                return None
            if hour != h:
                h, mi, s = hour, 0, 0
            minute = _next_in(self.minutes, mi)
            if minute is None:
                h, mi, s = h + 1, 0, 0
                continue
            if minute != mi:
                mi, s = minute, 0
            second = _next_in(self.seconds, s)
            if second is not None:
                return h, mi, second
            mi, s = mi + 1, 0

    def _next_year(self, y: int, start_year: int) -> int | None:
        if self.years is not None:
            return _next_in(self.years, y)
        if y > _LAST_YEAR:
            return None
        if y - start_year == _SUSPICIOUS_YEARS and not self._can_ever_fire():
            return None
        return y

    def _can_ever_fire(self) -> bool:
        # Every month shape recurs within the 400-year Gregorian cycle.
        lengths = {2: (28, 29), 4: (30,), 6: (30,), 9: (30,), 11: (30,)}
        return any(
            month_days(self.dom, self.dow, length, first)
            for month in self.months
            for length in lengths.get(month, (31,))
            for first in range(7)
        )


def _sorted(values: frozenset[int]) -> tuple[int, ...]:
    return tuple(sorted(values))


def _split(text: str, dialect: Dialect) -> list[str]:
    """The 7 fields (second ... year) of a non-macro expression."""
    parts = text.split()
    count = len(parts)
    if dialect == "standard":
        if count == 5:
            return ["0", *parts, "*"]
        if count in (6, 7):
            return parts if count == 7 else [*parts, "*"]
        expected = "5, 6 or 7"
    else:
        if count in (6, 7):
            return parts if count == 7 else [*parts, "*"]
        expected = "6 or 7"
    raise InvalidInput(
        "expression", f"expected {expected} fields for dialect {dialect}, got {count}"
    )


def _check_question_marks(parts: list[str], dialect: Dialect, fields: DialectFields) -> None:
    names = ("second", "minute", "hour", None, "month", None, "year")
    for name, text in zip(names, parts, strict=True):
        if name is not None and "?" in text:
            raise InvalidInput(name, "'?' is only allowed in day-of-month and day-of-week")
    dom_q, dow_q = parts[3] == "?", parts[5] == "?"
    where = f"{fields.dom.name}, {fields.dow.name}"
    if dialect == "quartz" and dom_q == dow_q:
        raise InvalidInput(where, "exactly one of them must be '?' in the quartz dialect")
    if dom_q and dow_q:
        raise InvalidInput(where, "only one of them may be '?'")


def _is_star(text: str, dialect: Dialect) -> bool:
    # Quartz reads a bare '/5' as '*/5'.
    return text.startswith("*") or (dialect == "quartz" and text.startswith("/"))


def _parse(expression: str, dialect: Dialect) -> CronExpression:
    text = expression.strip()
    if text.startswith("@"):
        return _parse_macro(expression, text, dialect)
    fields = STANDARD if dialect == "standard" else QUARTZ
    parts = _split(text, dialect)
    _check_question_marks(parts, dialect, fields)
    sec, minute, hour, dom, month, dow, year = parts
    seconds = _sorted(parse_values(fields.second, sec))
    return CronExpression(
        source=expression,
        dialect=dialect,
        seconds=seconds,
        minutes=_sorted(parse_values(fields.minute, minute)),
        hours=_sorted(parse_values(fields.hour, hour)),
        months=_sorted(parse_values(fields.month, month)),
        years=None if year == "*" else _sorted(parse_values(fields.year, year)),
        dom=parse_dom(fields.dom, dom),
        dow=parse_dow(fields.dow, dow, quartz=dialect == "quartz"),
        # Debian's DST adjustments are for jobs at fixed times, written as cron lines
        # Debian could run: a seconds field other than 0 opts out (as cronsim does).
        fixed_time=not _is_star(minute, dialect)
        and not _is_star(hour, dialect)
        and seconds == (0,),
    )


def _parse_macro(expression: str, text: str, dialect: Dialect) -> CronExpression:
    word, _, rest = text.partition(" ")
    if dialect != "standard":
        raise InvalidInput("expression", f"{word} is only available in the standard dialect")
    if word.upper() == "@EVERY":
        seconds = parse_every(rest)
        empty = DomSpec(True, frozenset(), frozenset(), frozenset(), frozenset())
        no_days = DowSpec(True, frozenset(), frozenset(), frozenset())
        return CronExpression(
            expression, dialect, (), (), (), (), None, empty, no_days, False, every=seconds
        )
    body = MACROS.get(text.upper())
    if body is None:
        raise InvalidInput(
            "expression",
            f"unknown macro {text!r} (expected @yearly, @annually, @monthly, @weekly, "
            "@daily, @midnight, @hourly or @every <duration>)",
        )
    return replace(_parse(body, dialect), source=expression)


_parse_cached = lru_cache(maxsize=8192)(_parse)
