"""Schedules to and from JSON-safe dicts (ISO 8601 strings for datetimes).

``{"kind": "cron", "cron": "0 9 * * MON-FRI", "timezone": "Europe/Paris"}``,
``{"kind": "once", "at": "2030-01-01T09:00:00+00:00"}``, ``{"kind": "delay", "seconds": 30}``,
``{"kind": "immediate"}``, ``{"kind": "interval", "every_seconds": 60}``,
``{"kind": "manual"}`` (runs only when triggered or enqueued to); every kind but manual also
takes ``start_at`` and ``end_at``; cron also ``dialect``, ``dst_gap``, ``dst_overlap``;
interval also ``anchor``. Unknown keys are refused, so a typo never goes unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from cronwheel.errors import InvalidInput
from cronwheel.schedule.kinds import (
    CronSchedule,
    DelaySchedule,
    ImmediateSchedule,
    IntervalSchedule,
    ManualSchedule,
    OnceSchedule,
    Schedule,
    aware_utc,
)

_BOUNDS = ("start_at", "end_at")
_DATETIMES = frozenset({"at", "anchor", *_BOUNDS})
_STRINGS = frozenset({"cron", "timezone", "dialect", "dst_gap", "dst_overlap"})
# kind -> (class, required keys, optional keys)
_KINDS: Mapping[str, tuple[Callable[..., Schedule], tuple[str, ...], tuple[str, ...]]] = {
    "immediate": (ImmediateSchedule, (), ()),
    "once": (OnceSchedule, ("at",), ()),
    "delay": (DelaySchedule, ("seconds",), ()),
    "cron": (CronSchedule, ("cron",), ("timezone", "dialect", "dst_gap", "dst_overlap")),
    "interval": (IntervalSchedule, ("every_seconds",), ("anchor",)),
    "manual": (ManualSchedule, (), ()),
}
_DEFAULTS: Mapping[str, str] = {
    "dialect": "standard",
    "dst_gap": "gap_end",
    "dst_overlap": "first",
}


def schedule_from_dict(data: Mapping[str, Any]) -> Schedule:
    """Build a schedule from its dict form; raise ``InvalidInput`` naming the bad field."""
    if not isinstance(data, Mapping):
        raise InvalidInput("schedule", f"expected an object, got {type(data).__name__}")
    kind = data.get("kind")
    if kind is None:
        raise InvalidInput("kind", "is required")
    if not isinstance(kind, str) or kind not in _KINDS:
        raise InvalidInput("kind", f"unknown schedule kind {kind!r} (expected {', '.join(_KINDS)})")
    cls, required, optional = _KINDS[kind]
    bounds = () if cls is ManualSchedule else _BOUNDS  # nothing to bound: it never fires
    allowed = {"kind", *required, *optional, *bounds}
    unknown = sorted(str(key) for key in data if key not in allowed)
    if unknown:
        listed = ", ".join(sorted(allowed))
        raise InvalidInput(", ".join(unknown), f"unknown field for kind {kind} (allowed: {listed})")
    for key in required:
        if key not in data:
            raise InvalidInput(key, f"is required for kind {kind}")
    values = {key: _decode(key, value) for key, value in data.items() if key != "kind"}
    return cls(**values)


def schedule_to_dict(schedule: Schedule) -> dict[str, Any]:
    """The JSON-safe dict form of ``schedule``; ``schedule_from_dict`` reads it back."""
    out: dict[str, Any] = {"kind": schedule.kind}
    if isinstance(schedule, OnceSchedule):
        out["at"] = schedule.at.isoformat()
    elif isinstance(schedule, DelaySchedule):
        out["seconds"] = schedule.seconds
    elif isinstance(schedule, CronSchedule):
        out["cron"] = schedule.cron
        out["timezone"] = schedule.timezone
        for key, default in _DEFAULTS.items():
            if getattr(schedule, key) != default:
                out[key] = getattr(schedule, key)
    elif isinstance(schedule, IntervalSchedule):
        out["every_seconds"] = schedule.every_seconds
        if schedule.anchor is not None:
            out["anchor"] = schedule.anchor.isoformat()
    for key in _BOUNDS:
        value = getattr(schedule, key)
        if value is not None:
            out[key] = value.isoformat()
    return out


def _decode(key: str, value: object) -> object:
    if key in _DATETIMES:
        return None if value is None and key != "at" else _datetime(key, value)
    if key in _STRINGS and not isinstance(value, str):
        raise InvalidInput(key, f"expected a string, got {type(value).__name__}")
    return value


def _datetime(key: str, value: object) -> datetime:
    if isinstance(value, datetime):
        return aware_utc(key, value)
    if not isinstance(value, str):
        raise InvalidInput(key, f"expected an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(key, f"{value!r} is not an ISO 8601 datetime") from None
    return aware_utc(key, parsed)
