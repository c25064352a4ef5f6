"""From wall-clock matches to instants: the DST policies.

An expression matches local wall times; a zone maps wall times to instants. The timeline
is cut by the zone's transitions into segments of constant offset, and the occurrences
strictly after ``start`` are found segment by segment:

* a *regular* occurrence is an instant whose wall reading matches. In a fall-back
  overlap a wall time is read twice; ``dst_overlap`` keeps the ``first`` reading, the
  ``last`` one, or ``both``;
* a wall time inside a spring-forward gap is never read. ``dst_gap`` drops it (``skip``),
  fires it at the instant the gap ends (``gap_end``; several collapse into that one
  instant) or fires it with the offset in force before the gap (``shift``: 02:30 in a
  one-hour gap fires at 03:30).

Instants are compared as POSIX seconds, so a moved or shifted occurrence that lands on
a regular one fires once, and the results strictly increase.

Debian cron (the defaults, ``gap_end`` + ``first``) only adjusts *fixed-time* jobs; a
*wall-clock* job (minute or hour field starting with ``*``) follows the clock: it skips
wall times that do not exist and fires in both copies of a repeated hour. So, for a
wall-clock job, the default ``gap_end`` means ``skip`` and the default ``first`` means
``both``; every other value applies to wall-clock and fixed-time jobs alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Final, Literal, NamedTuple

from cronwheel.errors import InvalidInput
from cronwheel.schedule.cron import CronExpression
from cronwheel.schedule.timezones import (
    FIRST_INSTANT,
    LAST_INSTANT,
    Transition,
    first_transition,
    last_transition,
    load_zone,
    offset_at,
)

GapPolicy = Literal["gap_end", "skip", "shift"]
OverlapPolicy = Literal["first", "last", "both"]
DstMark = Literal["moved", "shifted", "merged", "repeated"]
GAP_POLICIES: Final = ("gap_end", "skip", "shift")
OVERLAP_POLICIES: Final = ("first", "last", "both")

_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MICROSECOND = timedelta(microseconds=1)
# Longer than any DST shift: how far around an instant transitions can matter.
_WINDOW = 2 * 86400


@dataclass(frozen=True, slots=True)
class Occurrence:
    """One fire time: ``at`` (aware, in the job's zone), the local ``wall`` time the
    expression matched (naive), and ``dst``: how a DST transition affected it.

    ``dst`` is None (a plain occurrence), ``"moved"`` (its wall time fell in a gap and it
    fires when the gap ends), ``"shifted"`` (in a gap, fired with the pre-gap offset),
    ``"merged"`` (its wall time happens twice; it fires once) or ``"repeated"`` (its wall
    time happens twice and it fires both times).
    """

    at: datetime
    wall: datetime
    dst: DstMark | None

    @property
    def utc(self) -> datetime:
        """The same instant in UTC."""
        return self.at.astimezone(UTC)


class _Hit(NamedTuple):
    instant: int
    rank: int  # 0 for a regular occurrence, so that it wins a tie with an adjusted one
    wall: int
    mark: DstMark | None


def check_policies(dst_gap: str, dst_overlap: str) -> tuple[GapPolicy, OverlapPolicy]:
    """Validate the two policy names; raise an error naming the bad one."""
    if dst_gap not in GAP_POLICIES:
        raise InvalidInput(
            "dst_gap", f"unknown policy {dst_gap!r} (expected gap_end, skip or shift)"
        )
    if dst_overlap not in OVERLAP_POLICIES:
        raise InvalidInput(
            "dst_overlap", f"unknown policy {dst_overlap!r} (expected first, last or both)"
        )
    return dst_gap, dst_overlap  # type: ignore[return-value]


def effective_policies(
    expr: CronExpression, dst_gap: GapPolicy, dst_overlap: OverlapPolicy
) -> tuple[GapPolicy, OverlapPolicy]:
    """Debian's defaults leave wall-clock jobs on the wall clock (see the module doc)."""
    if expr.fixed_time:
        return dst_gap, dst_overlap
    return (
        "skip" if dst_gap == "gap_end" else dst_gap,
        "both" if dst_overlap == "first" else dst_overlap,
    )


def floor_seconds(moment: datetime) -> int:
    """Whole POSIX seconds of an aware datetime, rounded down."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidInput("start", "must be timezone-aware (a naive datetime is ambiguous)")
    micros = (moment - _EPOCH_UTC) // _MICROSECOND
    return micros // 1_000_000


def occurrences(
    expr: CronExpression,
    start: datetime,
    tz: str | tzinfo,
    count: int,
    *,
    dst_gap: str = "gap_end",
    dst_overlap: str = "first",
) -> list[Occurrence]:
    """At most ``count`` occurrences strictly after the aware ``start``, in zone ``tz``."""
    zone = load_zone(tz)
    gap, overlap = effective_policies(expr, *check_policies(dst_gap, dst_overlap))
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidInput("count", "must be a non-negative integer")
    seconds = floor_seconds(start)
    if expr.every is not None:
        return _every(expr.every, start, zone, count)
    walker = _Walker(expr, zone, gap, overlap)
    found: list[Occurrence] = []
    s = max(seconds + 1, FIRST_INSTANT)  # the first whole second strictly after start
    while len(found) < count:
        hit = walker.next(s)
        if hit is None:
            break
        found.append(_occurrence(hit, zone))
        s = hit.instant + 1
    return found


def next_occurrence(
    expr: CronExpression,
    start: datetime,
    tz: str | tzinfo,
    *,
    dst_gap: str = "gap_end",
    dst_overlap: str = "first",
) -> Occurrence | None:
    """The first occurrence strictly after ``start``, or None if there is none."""
    found = occurrences(expr, start, tz, 1, dst_gap=dst_gap, dst_overlap=dst_overlap)
    return found[0] if found else None


def _every(every: int, start: datetime, zone: tzinfo, count: int) -> list[Occurrence]:
    # @every is relative to start and ignores the calendar, hence DST: count elapsed time.
    base = (start - _EPOCH_UTC) // _MICROSECOND
    result = []
    for k in range(1, count + 1):
        micros = base + k * every * 1_000_000
        if micros // 1_000_000 > LAST_INSTANT:
            break
        if micros // 1_000_000 >= FIRST_INSTANT:
            at = (_EPOCH_UTC + micros * _MICROSECOND).astimezone(zone)
            result.append(Occurrence(at, at.replace(tzinfo=None), None))
    return result


def _occurrence(hit: _Hit, zone: tzinfo) -> Occurrence:
    return Occurrence(
        datetime.fromtimestamp(hit.instant, zone), _EPOCH + hit.wall * _SECOND, hit.mark
    )


class _Walker:
    """Finds the first occurrence at or after an instant, one offset segment at a time."""

    def __init__(
        self, expr: CronExpression, zone: tzinfo, gap: GapPolicy, overlap: OverlapPolicy
    ) -> None:
        self.expr = expr
        self.zone = zone
        self.gap = gap
        self.overlap = overlap

    def next(self, s: int) -> _Hit | None:
        """The first occurrence at or after instant ``s`` (POSIX seconds)."""
        if s > LAST_INSTANT:
            return None
        # Invariant: ``prev`` is the last transition at or before ``s`` (if recent enough to
        # matter), so the offset is constant from ``s`` to the next transition ``nxt``.
        # Every candidate in that segment is a regular reading or a gap hit of ``prev``;
        # if there is none, move to the next segment.
        prev = last_transition(self.zone, s, _WINDOW)
        while True:
            offset = prev.after if prev is not None else offset_at(self.zone, s)
            lo = s
            if prev is not None and not prev.is_gap and self.overlap == "first":
                lo = max(s, prev.at + prev.width)  # the second copy is not read again
            wall = self.expr.next_wall(lo + offset)
            instant = None if wall is None else wall - offset
            nxt = first_transition(self.zone, s, (s if instant is None else instant) + _WINDOW)
            hits = [
                hit
                for hit in (self._regular(instant, wall, prev, nxt), self._gap_hit(s, prev))
                if hit is not None
            ]
            if hits:
                return min(hits)
            if nxt is None:
                return None
            s, prev = nxt.at, nxt

    def _regular(
        self, instant: int | None, wall: int | None, prev: Transition | None, nxt: Transition | None
    ) -> _Hit | None:
        if instant is None or wall is None or (nxt is not None and instant >= nxt.at):
            return None
        mark: DstMark | None = None
        if nxt is not None and not nxt.is_gap and instant >= nxt.at - nxt.width:
            # The first reading of a wall time that will be read again after nxt.
            if self.overlap == "last":
                return None
            mark = "merged" if self.overlap == "first" else "repeated"
        elif prev is not None and not prev.is_gap and instant < prev.at + prev.width:
            # The second reading ("first" never gets here: it starts past them).
            mark = "merged" if self.overlap == "last" else "repeated"
        return _Hit(instant, 0, wall, mark)

    def _gap_hit(self, s: int, prev: Transition | None) -> _Hit | None:
        """The occurrence that a gap policy makes of wall times in the gap before ``s``."""
        if prev is None or not prev.is_gap or self.gap == "skip" or s >= prev.at + prev.width:
            return None
        gap_start, gap_end = prev.at + prev.before, prev.at + prev.after
        if self.gap == "gap_end":
            if s > prev.at:
                return None
            wall = self.expr.next_wall(gap_start)
            return _Hit(prev.at, 1, wall, "moved") if wall is not None and wall < gap_end else None
        wall = self.expr.next_wall(max(gap_start, s + prev.before))
        if wall is None or wall >= gap_end:
            return None
        return _Hit(wall - prev.before, 1, wall, "shifted")
