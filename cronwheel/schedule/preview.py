"""What a schedule will do next, as a person checks it: the next fire times with their
UTC offsets and how daylight saving time touched each one (for the dashboard, ``jobs
get`` and ``POST /v1/schedules/preview``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

from cronwheel.schedule.kinds import CronSchedule, Schedule, first_fire, next_fire
from cronwheel.schedule.occurrences import next_occurrence
from cronwheel.schedule.timezones import load_zone

MAX_PREVIEW = 100
"""The most fire times one preview computes."""
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire time: the instant (UTC), the wall time in the schedule's zone, its
    offset, and what DST did to it."""

    at: datetime
    local: datetime
    offset: str
    """The zone's UTC offset at that instant: ``+01:00``."""
    dst: str | None
    """``moved`` (its wall time fell in a spring-forward gap; it fires when the gap
    ends), ``shifted`` (in a gap, fired with the offset before it), ``merged`` (its wall
    time happens twice; it fires once), ``repeated`` (it fires both times), or None."""
    offset_changed: bool
    """The offset differs from the previous fire's: a DST change happened in between."""


def zone_of(schedule: Schedule) -> tzinfo:
    """The zone a schedule's wall times are read in (UTC but for cron)."""
    return load_zone(schedule.timezone) if isinstance(schedule, CronSchedule) else UTC


def upcoming(schedule: Schedule, first: datetime | None, count: int) -> list[Fire]:
    """``first`` (a job's ``next_fire_at``) and the fire times that follow it, at most
    ``count`` (capped at :data:`MAX_PREVIEW`)."""
    zone = zone_of(schedule)
    fires: list[Fire] = []
    at = first
    previous_offset: timedelta | None = None
    while at is not None and len(fires) < min(count, MAX_PREVIEW):
        local = at.astimezone(zone)
        offset = local.utcoffset() or timedelta(0)
        fires.append(
            Fire(
                at=at.astimezone(UTC),
                local=local,
                offset=_offset_text(offset),
                dst=_dst_mark(schedule, at),
                offset_changed=previous_offset is not None and offset != previous_offset,
            )
        )
        previous_offset = offset
        try:
            at = next_fire(schedule, at)
        except (OverflowError, ArithmeticError):
            at = None  # past year 9999: there is no next fire
    return fires


def preview(schedule: Schedule, now: datetime, count: int) -> list[Fire]:
    """The first ``count`` fire times of a job created now with ``schedule``."""
    return upcoming(schedule, first_fire(schedule, now), count)


def _dst_mark(schedule: Schedule, at: datetime) -> str | None:
    if not isinstance(schedule, CronSchedule) or schedule.expression.every is not None:
        return None
    found = next_occurrence(
        schedule.expression,
        at - _SECOND,
        schedule.timezone,
        dst_gap=schedule.dst_gap,
        dst_overlap=schedule.dst_overlap,
    )
    if found is None or found.utc != at.astimezone(UTC):
        return None
    return None if found.dst is None else str(found.dst)


def _offset_text(offset: timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{rest:02d}"
