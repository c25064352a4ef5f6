"""A brute-force oracle, written independently of the engine: it steps through every
instant (minute or second), reads the local wall clock with ``zoneinfo`` and matches
it against explicit field predicates. Slow and simple on purpose."""

from __future__ import annotations

import calendar
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

DayRule = Callable[[date], bool]


@dataclass(frozen=True)
class OracleCron:
    """What an expression means, as plain predicates (built by the test's strategy)."""

    text: str
    seconds: frozenset[int] | None  # None: a 5-field expression (seconds = {0})
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    dom: DayRule
    dow: DayRule
    dom_star: bool
    dow_star: bool
    fixed_time: bool

    def matches(self, wall: datetime) -> bool:
        seconds = self.seconds if self.seconds is not None else frozenset({0})
        if not (
            wall.second in seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
        ):
            return False
        day = wall.date()
        if self.dom_star or self.dow_star:
            return self.dom(day) and self.dow(day)
        return self.dom(day) or self.dow(day)


def month_length(day: date) -> int:
    return calendar.monthrange(day.year, day.month)[1]


def cron_weekday(day: date) -> int:
    """0 = Sunday ... 6 = Saturday."""
    return (day.weekday() + 1) % 7


def nearest_weekday(day: date, n: int) -> bool:
    """Is ``day`` the weekday nearest to day ``n`` of its month (never leaving it)?"""
    length = month_length(day)
    if n > length:
        return False
    candidates = [d for d in range(1, length + 1) if cron_weekday(day.replace(day=d)) not in (0, 6)]
    best = min(candidates, key=lambda d: (abs(d - n), d))
    return day.day == best


def expected(
    cron: OracleCron, zone: ZoneInfo, start: int, end: int, gap: str, overlap: str
) -> list[int]:
    """Every fire instant (POSIX seconds) in (start, end] under the given policies."""
    if not cron.fixed_time:  # Debian's defaults leave wall-clock jobs on the clock
        gap = "skip" if gap == "gap_end" else gap
        overlap = "both" if overlap == "first" else overlap
    step = 60 if cron.seconds is None else 1
    found: set[int] = set()
    # Start early: a gap just before ``start`` can shift an occurrence past it.
    u = start - start % step - 6 * 3600
    previous = _wall(u, zone)
    while u <= end:
        u += step
        wall = _wall(u, zone)
        if wall - previous > timedelta(seconds=step):  # clocks jumped: a gap
            _gap_fires(cron, zone, previous, wall, u, gap, found)
        if cron.matches(wall) and _overlap_keeps(wall, zone, u, overlap):
            found.add(u)
        previous = wall
    return sorted(x for x in found if start < x <= end)


def _wall(u: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(u, zone).replace(tzinfo=None)


def _overlap_keeps(wall: datetime, zone: ZoneInfo, u: int, overlap: str) -> bool:
    first = int(wall.replace(tzinfo=zone, fold=0).timestamp())
    second = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    if first == second or overlap == "both":
        return True
    return u == (first if overlap == "first" else second)


def _gap_fires(
    cron: OracleCron,
    zone: ZoneInfo,
    before: datetime,
    after: datetime,
    u: int,
    gap: str,
    found: set[int],
) -> None:
    step = timedelta(seconds=60 if cron.seconds is None else 1)
    wall = before + step
    while wall < after:
        if cron.matches(wall):
            if gap == "gap_end":
                found.add(u)
            elif gap == "shift":  # PEP 495: fold=0 reads a gap time with the old offset
                found.add(int(wall.replace(tzinfo=zone, fold=0).timestamp()))
        wall += step


def utc(u: int) -> datetime:
    return datetime.fromtimestamp(u, UTC)
