"""Why didn't it run at 09:00? The pure part of the answer: read the asked time in the
job's zone, and find the schedule's fire times around it (with their DST marks).

The API (``GET /v1/jobs/{id}/why``) adds what the store knows: the run of that
occurrence, its attempts, and the job's pauses from the audit log. No I/O here, and
"now" is a parameter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from cronwheel.errors import InvalidInput
from cronwheel.schedule import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
    load_zone,
    occurrences,
)

_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?$")
AT_PATTERN = (
    r"^(?:(?:[01]?[0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9])?"
    r"|[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:[T ](?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?"
    r"(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?)?)$"
)
"""The times :func:`read_time` reads (the OpenAPI document's pattern for ``at``):
``HH:MM``, ``HH:MM:SS``, or an ISO 8601 date with an optional time and offset. A
date that has the form but not a day in the calendar (February 30) is still refused."""
_AT = re.compile(AT_PATTERN)
_SPANS = (
    timedelta(minutes=2),
    timedelta(hours=2),
    timedelta(days=2),
    timedelta(days=33),
    timedelta(days=400),
)
"""How far back the previous fire time is looked for, widening: a job that fires every
second is answered from the first span, a yearly one from the last; past it there is
"no fire time in the year before"."""
_BATCH = 500

DST_NOTES = {
    "moved": "its wall time does not exist that day (DST gap): it fires when the gap ends",
    "shifted": "its wall time does not exist that day (DST gap): shifted by the jump",
    "merged": "its wall time occurs twice that day (DST overlap): it fires once",
    "repeated": "its wall time occurs twice that day (DST overlap): it fires both times",
}


@dataclass(frozen=True, slots=True)
class Asked:
    """The time a person asked about, read in the job's zone."""

    instant: datetime
    """Aware, in the job's zone."""
    zone: str
    assumed: str
    """How the text was read, in words: which day and zone were assumed."""
    wall: datetime | None
    """The naive wall time asked, when no offset was given (a DST gap may skip it)."""
    dst_note: str | None = None
    """The asked wall time does not exist, or exists twice, in the zone that day."""


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire time of the schedule."""

    at: datetime
    """Aware, in the job's zone."""
    dst: str | None = None
    """How DST moved it (see :class:`cronwheel.schedule.Occurrence`), or None."""
    wall: datetime | None = None
    """The wall time the cron expression matched (naive), for a cron schedule."""

    @property
    def utc(self) -> datetime:
        return self.at.astimezone(UTC)


def zone_of(schedule: Schedule) -> str:
    """The zone a job's times are read in: its cron schedule's, else UTC."""
    return schedule.timezone if isinstance(schedule, CronSchedule) else "UTC"


def read_time(text: str, zone_name: str, now: datetime) -> Asked:
    """``HH:MM`` (or ``HH:MM:SS``) today in the zone, or an ISO 8601 date-time (read in
    the zone when it has no offset). Raises InvalidInput naming ``at``."""
    zone = load_zone(zone_name)
    if _AT.fullmatch(text) is None:
        raise InvalidInput("at", f"{text[:40]!r} is neither HH:MM nor an ISO 8601 date-time")
    clock = _CLOCK.match(text)
    if clock:
        today = now.astimezone(zone).date()
        hour, minute, second = (int(g or 0) for g in clock.groups())
        wall = datetime(today.year, today.month, today.day, hour, minute, second)
        assumed = f"{text} read as today ({today.isoformat()}) in {zone_name}"
    else:
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidInput("at", f"{text!r} is no date in the calendar ({exc})") from None
        if parsed.tzinfo is not None:
            instant = parsed.astimezone(zone)
            return Asked(
                instant, zone_name, f"{text} is {instant.isoformat()} in {zone_name}", None
            )
        wall = parsed
        assumed = f"{text} read in {zone_name}"
    return _from_wall(wall, zone, zone_name, assumed)


def latest_asked(schedule: Schedule, now: datetime, *, created_at: datetime) -> Asked:
    """What a question without a time asks about: the schedule's latest occurrence at or
    before ``now`` since the job was created; without one, its next occurrence; without
    either, ``now`` itself."""
    zone_name = zone_of(schedule)
    before, after = fires_around(schedule, now, created_at=created_at)
    if before is not None and before.utc >= created_at:
        return Asked(
            before.at,
            zone_name,
            f"No time given: the latest occurrence, {before.at.isoformat()} in {zone_name}",
            before.wall,
        )
    if after is not None:
        return Asked(
            after.at,
            zone_name,
            "No time given and no occurrence since the job was created: the next one,"
            f" {after.at.isoformat()} in {zone_name}",
            after.wall,
        )
    instant = now.astimezone(load_zone(zone_name))
    return Asked(
        instant,
        zone_name,
        f"No time given and no occurrence: asked about now, {instant.isoformat()} in {zone_name}",
        None,
    )


def _from_wall(wall: datetime, zone: tzinfo, zone_name: str, assumed: str) -> Asked:
    instant = wall.replace(tzinfo=zone)
    back = instant.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    note = None
    if back != wall:
        note = f"{wall.time().isoformat()} does not exist on {wall.date()} in {zone_name} (DST gap)"
    elif wall.replace(tzinfo=zone, fold=1).utcoffset() != instant.utcoffset():
        note = (
            f"{wall.time().isoformat()} occurs twice on {wall.date()} in {zone_name}"
            " (DST overlap): the first one is meant"
        )
    return Asked(instant.astimezone(UTC).astimezone(zone), zone_name, assumed, wall, note)


def fires_around(
    schedule: Schedule, instant: datetime, *, created_at: datetime
) -> tuple[Fire | None, Fire | None]:
    """The schedule's last fire time at or before ``instant`` and its first one after,
    in the schedule's zone (None where there is none)."""
    zone = load_zone(zone_of(schedule))
    if isinstance(schedule, CronSchedule):
        if schedule.expression.every is not None:
            return None, None  # @every counts from the last fire: no fixed times
        return _cron_around(schedule, instant)
    if isinstance(schedule, IntervalSchedule):
        anchor = schedule.anchor or schedule.start_at or created_at
        every = schedule.every
        k = (instant - anchor) // every
        candidates = [anchor + (k + i) * every for i in (-1, 0, 1, 2)]
        candidates = [c for c in candidates if _within(schedule, c) and c >= anchor]
        before = [c for c in candidates if c <= instant]
        after = [c for c in candidates if c > instant]
        return (
            Fire(before[-1].astimezone(zone)) if before else None,
            Fire(after[0].astimezone(zone)) if after else None,
        )
    if isinstance(schedule, ManualSchedule):
        return None, None
    if isinstance(schedule, OnceSchedule):
        once = schedule.at
    elif isinstance(schedule, DelaySchedule):
        once = created_at + timedelta(seconds=schedule.seconds)
    else:
        assert isinstance(schedule, ImmediateSchedule)
        once = max(created_at, schedule.start_at or created_at)
    fire = Fire(once.astimezone(zone))
    return (fire, None) if once <= instant else (None, fire)


def _within(schedule: IntervalSchedule, moment: datetime) -> bool:
    if schedule.start_at is not None and moment < schedule.start_at:
        return False
    return schedule.end_at is None or moment <= schedule.end_at


def _cron_around(schedule: CronSchedule, instant: datetime) -> tuple[Fire | None, Fire | None]:
    expr = schedule.expression
    policies = {"dst_gap": schedule.dst_gap, "dst_overlap": schedule.dst_overlap}
    before: Fire | None = None
    after: Fire | None = None
    for span in _SPANS:
        before = after = None
        start = instant - span
        while after is None:
            batch = occurrences(expr, start, schedule.timezone, _BATCH, **policies)
            if not batch:
                break
            for found in batch:
                fire = Fire(found.at, found.dst, found.wall)
                if found.utc > instant:
                    after = fire
                    break
                before = fire
            start = batch[-1].at
        if before is not None:
            break
    return _bounded(schedule, before), _bounded(schedule, after)


def _bounded(schedule: CronSchedule, fire: Fire | None) -> Fire | None:
    if fire is None:
        return None
    if schedule.start_at is not None and fire.utc < schedule.start_at:
        return None
    if schedule.end_at is not None and fire.utc > schedule.end_at:
        return None
    return fire


def falls_at(fire: Fire | None, asked: Asked) -> bool:
    """Whether ``fire`` is the occurrence asked about: in the asked minute, or matching
    the asked wall time (a wall time that DST moved still names its occurrence)."""
    if fire is None:
        return False
    minute = asked.instant.astimezone(UTC).replace(second=0, microsecond=0)
    if minute <= fire.utc < minute + timedelta(minutes=1):
        return True
    if asked.wall is None or fire.wall is None:
        return False
    return fire.wall.replace(second=0, microsecond=0) == asked.wall.replace(second=0, microsecond=0)
