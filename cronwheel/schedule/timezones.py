"""IANA zones, and the instants at which their UTC offset changes.

``zoneinfo`` answers "what is the offset at this instant" but does not list transitions,
which the DST policies need (where a gap starts, how long an overlap lasts). We find
them by sampling each UTC year once a day and bisecting every change to the second,
then cache the result per (zone, year). This relies on two offset changes never being
less than a day apart, which holds for every zone in tzdata since 1970 (the closest
pairs are about a week apart).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronwheel.errors import InvalidInput

_DAY = 86400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Instants are only computed from year 2 to year 9998: far from datetime's limits, so
# that no offset can push a conversion out of range.
FIRST_INSTANT = (date(2, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY
LAST_INSTANT = (date(9999, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY - 1
_MACHINE_FILES = frozenset({"localtime", "posixrules", "Factory", "leapseconds", "tzdata.zi"})
_FIXED_KEYS = re.compile(r"(Etc/.*|UTC|UCT|GMT[+-]?0?|Universal|Zulu|Greenwich)")


@dataclass(frozen=True, slots=True)
class Transition:
    """A change of UTC offset at instant ``at`` (POSIX seconds), offsets in seconds."""

    at: int
    before: int
    after: int

    @property
    def is_gap(self) -> bool:
        """Clocks jump forward: the wall times in [at + before, at + after) never happen."""
        return self.after > self.before

    @property
    def width(self) -> int:
        """How long the gap or the repeated interval lasts, in seconds."""
        return abs(self.after - self.before)


def load_zone(zone: str | tzinfo) -> tzinfo:
    """An IANA zone by name (a ``tzinfo`` passes through); raise an error naming ``timezone``."""
    if isinstance(zone, tzinfo):
        return zone
    if not isinstance(zone, str):
        raise InvalidInput("timezone", f"expected an IANA zone name, got {type(zone).__name__}")
    return _load(zone)


@lru_cache(maxsize=1024)
def _load(name: str) -> ZoneInfo:
    if name in _MACHINE_FILES or name.startswith(("posix/", "right/", "/", ".")):
        # Files of the zone database that are not zones: they depend on the machine
        # (``localtime`` is whatever the host is set to) or count leap seconds.
        raise InvalidInput("timezone", f"unknown IANA zone {name!r} (a zone's name: Europe/Paris)")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput("timezone", f"unknown IANA zone {name!r}") from None


def offset_at(zone: tzinfo, instant: int) -> int:
    """The UTC offset (seconds) in force at ``instant`` (POSIX seconds)."""
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    assert offset is not None
    return offset // timedelta(seconds=1)


def first_transition(zone: tzinfo, after: int, until: int) -> Transition | None:
    """The first transition in (``after``, ``until``], if any."""
    for transition in _between(zone, after, until):
        return transition
    return None


def last_transition(zone: tzinfo, at: int, window: int) -> Transition | None:
    """The last transition in (``at - window``, ``at``], if any."""
    found = None
    for transition in _between(zone, at - window, at):
        found = transition
    return found


def _between(zone: tzinfo, after: int, until: int) -> Iterator[Transition]:
    if _is_fixed(zone):
        return
    for year in range(_year_of(after), _year_of(until) + 1):
        for transition in _transitions_of_year(zone, year):
            if after < transition.at <= until:
                yield transition


@lru_cache(maxsize=1024)
def _is_fixed(zone: tzinfo) -> bool:
    if isinstance(zone, timezone):
        return True
    return isinstance(zone, ZoneInfo) and _FIXED_KEYS.fullmatch(zone.key) is not None


def _year_of(instant: int) -> int:
    ordinal = instant // _DAY + _EPOCH_ORDINAL
    return date.fromordinal(min(max(ordinal, 1), date.max.toordinal())).year


def _year_start(year: int) -> int:
    return (date(year, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY


@lru_cache(maxsize=16384)
def _transitions_of_year(zone: tzinfo, year: int) -> tuple[Transition, ...]:
    """The transitions with ``at`` in (start of ``year``, start of ``year + 1``], UTC."""
    if not 2 <= year <= 9998:  # keep away from datetime's limits
        return ()
    found: list[Transition] = []
    end = _year_start(year + 1)
    t = _year_start(year)
    offset = offset_at(zone, t)
    while t < end:
        nxt = min(t + _DAY, end)
        new_offset = offset_at(zone, nxt)
        if new_offset != offset:
            found.append(Transition(_bisect(zone, t, nxt, offset), offset, new_offset))
        t, offset = nxt, new_offset
    return tuple(found)


def _bisect(zone: tzinfo, lo: int, hi: int, old: int) -> int:
    """The first instant in (lo, hi] whose offset is no longer ``old``."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset_at(zone, mid) == old:
            lo = mid
        else:
            hi = mid
    return hi
