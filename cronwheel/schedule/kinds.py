"""Schedule kinds: when a job fires. Pure values (no I/O, no clock reads).

Every datetime is aware and stored in UTC; every function returns UTC datetimes.
``start_at`` and ``end_at`` bound every kind, both inclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from cronwheel.errors import InvalidInput
from cronwheel.schedule.cron import CronExpression
from cronwheel.schedule.dialects import check_dialect
from cronwheel.schedule.occurrences import check_policies
from cronwheel.schedule.timezones import load_zone

_MICROSECOND = timedelta(microseconds=1)
MAX_SECONDS = 100 * 365 * 86400
MIN_INTERVAL_SECONDS = 1


def aware_utc(name: str, value: object) -> datetime:
    """``value`` as an aware UTC datetime; raise an error naming ``name`` otherwise."""
    if not isinstance(value, datetime):
        raise InvalidInput(name, f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(name, "must include a UTC offset (a naive datetime is ambiguous)")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is past the last datetime
        raise InvalidInput(name, "is out of range (after 9999-12-31 in UTC)") from None


def positive_seconds(name: str, value: object) -> float:
    """A finite number of seconds > 0 (an int stays an int)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(name, f"expected a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidInput(name, f"must be a finite number of seconds > 0, got {value!r}")
    if value > MAX_SECONDS:
        raise InvalidInput(name, f"must be at most {MAX_SECONDS} seconds (100 years)")
    return value


@dataclass(frozen=True)
class _Bounded:
    """``start_at`` / ``end_at``: no occurrence before the first or after the second."""

    start_at: datetime | None = field(default=None, kw_only=True)
    end_at: datetime | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        for name in ("start_at", "end_at"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, aware_utc(name, value))
        if self.start_at and self.end_at and self.end_at < self.start_at:
            raise InvalidInput("end_at", "must not be before start_at")

    def _within(self, moment: datetime | None) -> datetime | None:
        if moment is None or (self.end_at is not None and moment > self.end_at):
            return None
        return moment


@dataclass(frozen=True)
class ImmediateSchedule(_Bounded):
    """Fire once, as soon as possible (not before ``start_at``)."""

    kind: ClassVar[str] = "immediate"


@dataclass(frozen=True)
class ManualSchedule:
    """Never fire by itself: the job runs when it is triggered or runs are enqueued to
    it (a queue with a definition: one action, pool and policy for many runs). There is
    no schedule to bound, so it takes no ``start_at`` / ``end_at``."""

    kind: ClassVar[str] = "manual"
    start_at: ClassVar[None] = None
    end_at: ClassVar[None] = None


@dataclass(frozen=True)
class OnceSchedule(_Bounded):
    """Fire once, at ``at``."""

    at: datetime
    kind: ClassVar[str] = "once"

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", aware_utc("at", self.at))
        super().__post_init__()


@dataclass(frozen=True)
class DelaySchedule(_Bounded):
    """Fire once, ``seconds`` after the job is created (see :func:`resolve`)."""

    seconds: float
    kind: ClassVar[str] = "delay"

    def __post_init__(self) -> None:
        positive_seconds("seconds", self.seconds)
        super().__post_init__()


@dataclass(frozen=True)
class CronSchedule(_Bounded):
    """Fire on a cron expression, evaluated in ``timezone`` under a DST policy."""

    cron: str
    timezone: str = "UTC"
    dialect: str = "standard"
    dst_gap: str = "gap_end"
    dst_overlap: str = "first"
    kind: ClassVar[str] = "cron"

    def __post_init__(self) -> None:
        for name in ("cron", "timezone", "dialect", "dst_gap", "dst_overlap"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidInput(name, f"expected a string, got {type(value).__name__}")
        check_dialect(self.dialect)
        check_policies(self.dst_gap, self.dst_overlap)
        load_zone(self.timezone)
        try:
            CronExpression.parse(self.cron, self.dialect)
        except InvalidInput as exc:
            raise InvalidInput("cron", str(exc)) from None
        super().__post_init__()

    @property
    def expression(self) -> CronExpression:
        """The parsed expression (parsing is cached)."""
        return CronExpression.parse(self.cron, self.dialect)


@dataclass(frozen=True)
class IntervalSchedule(_Bounded):
    """Fire every ``every_seconds``, on the grid ``anchor + k * every_seconds``."""

    every_seconds: float
    anchor: datetime | None = None
    kind: ClassVar[str] = "interval"

    def __post_init__(self) -> None:
        positive_seconds("every_seconds", self.every_seconds)
        if self.every_seconds < MIN_INTERVAL_SECONDS:
            # Below a second the scheduler would plan thousands of runs per tick per job;
            # a timedelta would even round 1e-9 s to zero.
            raise InvalidInput("every_seconds", f"must be at least {MIN_INTERVAL_SECONDS} second")
        if self.anchor is not None:
            object.__setattr__(self, "anchor", aware_utc("anchor", self.anchor))
        super().__post_init__()

    @property
    def every(self) -> timedelta:
        """The period as a timedelta."""
        return timedelta(seconds=self.every_seconds)


Schedule = (
    ImmediateSchedule
    | OnceSchedule
    | DelaySchedule
    | CronSchedule
    | IntervalSchedule
    | ManualSchedule
)


def resolve(schedule: Schedule, now: datetime) -> Schedule:
    """Pin the parts relative to job creation at ``now``: a delay becomes a one-time
    schedule at ``now + seconds``; an interval without anchor is anchored at
    ``start_at`` or ``now``. Other schedules are returned unchanged."""
    now = aware_utc("now", now)
    if isinstance(schedule, DelaySchedule):
        at = now + timedelta(seconds=schedule.seconds)
        return OnceSchedule(at, start_at=schedule.start_at, end_at=schedule.end_at)
    if isinstance(schedule, IntervalSchedule) and schedule.anchor is None:
        return replace(schedule, anchor=schedule.start_at or now)
    return schedule


def first_fire(schedule: Schedule, now: datetime) -> datetime | None:
    """The first fire time of a job created at ``now``, or None if there is none.

    immediate: ``max(now, start_at)``. once: ``at``, even if past (lateness is the
    scheduler's misfire policy), unless outside start_at/end_at. delay: ``now + seconds``.
    interval: the first grid point at or after ``start_at`` if given (and not past),
    else the first one strictly after ``now`` (so an interval anchored at creation fires
    one period later). cron: the first occurrence at or after ``max(now, start_at)``.
    manual: None, always.
    """
    now = aware_utc("now", now)
    schedule = resolve(schedule, now)
    if isinstance(schedule, ManualSchedule):
        return None
    start = now if schedule.start_at is None else max(now, schedule.start_at)
    if isinstance(schedule, ImmediateSchedule):
        return schedule._within(start)
    if isinstance(schedule, OnceSchedule):
        before_start = schedule.start_at is not None and schedule.at < schedule.start_at
        return None if before_start else schedule._within(schedule.at)
    if isinstance(schedule, IntervalSchedule):
        inclusive = schedule.start_at is not None
        return schedule._within(_grid_point(schedule, start, inclusive=inclusive))
    assert isinstance(schedule, CronSchedule)
    return schedule._within(_cron_after(schedule, start - _MICROSECOND, start))


def next_fire(schedule: Schedule, after: datetime) -> datetime | None:
    """The first occurrence strictly after ``after`` (and not before ``start_at``), or
    None: always for immediate, once and delay schedules, which fire once, and for a
    manual one, which never fires by itself."""
    after = aware_utc("after", after)
    if isinstance(schedule, ImmediateSchedule | OnceSchedule | DelaySchedule | ManualSchedule):
        return None
    if isinstance(schedule, IntervalSchedule):
        if schedule.anchor is None:
            schedule = replace(schedule, anchor=schedule.start_at or after)
        if schedule.start_at is not None and schedule.start_at > after:
            return schedule._within(_grid_point(schedule, schedule.start_at, inclusive=True))
        return schedule._within(_grid_point(schedule, after, inclusive=False))
    if schedule.start_at is not None and schedule.start_at > after:
        start = schedule.start_at
        return schedule._within(_cron_after(schedule, start - _MICROSECOND, start))
    return schedule._within(_cron_after(schedule, after, after))


def _grid_point(schedule: IntervalSchedule, bound: datetime, *, inclusive: bool) -> datetime | None:
    """The first ``anchor + k * every`` at or after (or strictly after) ``bound``."""
    assert schedule.anchor is not None
    every = schedule.every
    k, rest = divmod(bound - schedule.anchor, every)
    if rest or not inclusive:
        k += 1
    try:
        return schedule.anchor + k * every
    except OverflowError:  # past year 9999: there is no next fire
        return None


def _cron_after(schedule: CronSchedule, after: datetime, reference: datetime) -> datetime | None:
    """The next cron occurrence strictly after ``after``; ``@every`` counts from ``reference``."""
    expr = schedule.expression
    if expr.every is not None:
        try:
            return reference + timedelta(seconds=expr.every)
        except OverflowError:  # past year 9999: there is no next fire
            return None
    found = expr.next_after(
        after, schedule.timezone, dst_gap=schedule.dst_gap, dst_overlap=schedule.dst_overlap
    )
    return None if found is None else found.astimezone(UTC)
