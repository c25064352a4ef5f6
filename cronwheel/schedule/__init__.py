"""cronwheel's schedule engine: cron expressions (standard and quartz dialects), their
fire times in any IANA zone under an explicit DST policy, and the schedule kinds a job
can have. Everything here is pure: no I/O, no clock reads. See docs/cron.md.
"""

from __future__ import annotations

from cronwheel.schedule.api import next_times, validate_cron
from cronwheel.schedule.codec import schedule_from_dict, schedule_to_dict
from cronwheel.schedule.cron import CronExpression
from cronwheel.schedule.dialects import DIALECTS, Dialect
from cronwheel.schedule.kinds import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
    first_fire,
    next_fire,
    resolve,
)
from cronwheel.schedule.occurrences import (
    GAP_POLICIES,
    OVERLAP_POLICIES,
    DstMark,
    GapPolicy,
    Occurrence,
    OverlapPolicy,
    occurrences,
)
from cronwheel.schedule.timezones import load_zone

__all__ = [
    "DIALECTS",
    "GAP_POLICIES",
    "OVERLAP_POLICIES",
    "CronExpression",
    "CronSchedule",
    "DelaySchedule",
    "Dialect",
    "DstMark",
    "GapPolicy",
    "ImmediateSchedule",
    "IntervalSchedule",
    "ManualSchedule",
    "Occurrence",
    "OnceSchedule",
    "OverlapPolicy",
    "Schedule",
    "first_fire",
    "load_zone",
    "next_fire",
    "next_times",
    "occurrences",
    "resolve",
    "schedule_from_dict",
    "schedule_to_dict",
    "validate_cron",
]
