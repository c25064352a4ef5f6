"""The two dialects: their fields, their shapes, the ``@`` macros and ``@every`` durations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from cronwheel.errors import InvalidInput
from cronwheel.schedule.fields import MAX_YEAR, MIN_YEAR, MONTH_NAMES, WEEKDAY_NAMES, FieldSpec

Dialect = Literal["standard", "quartz"]
Names = Mapping[str, int]
_NO_NAMES: Names = {}
DIALECTS: Final = ("standard", "quartz")


@dataclass(frozen=True)
class DialectFields:
    """The field specs of one dialect, in the order of a full 7-field expression."""

    second: FieldSpec
    minute: FieldSpec
    hour: FieldSpec
    dom: FieldSpec
    month: FieldSpec
    dow: FieldSpec
    year: FieldSpec


def _fields(quartz: bool) -> DialectFields:
    def spec(
        name: str, low: int, high: int, star_high: int | None = None, names: Names = _NO_NAMES
    ) -> FieldSpec:
        # Quartz wraps ranges around and bounds steps by the field; years never wrap.
        quartz_field = quartz and name != "year"
        return FieldSpec(
            name,
            low,
            high,
            high if star_high is None else star_high,
            names,
            wrap=quartz_field,
            max_step=high if quartz_field else None,
            bare_step=quartz,
        )

    if quartz:
        dow = spec("day-of-week", 1, 7, names={n: i + 1 for i, n in enumerate(WEEKDAY_NAMES)})
    else:
        names = {n: i for i, n in enumerate(WEEKDAY_NAMES)}
        dow = spec("day-of-week", 0, 7, star_high=6, names=names)
    return DialectFields(
        second=spec("second", 0, 59),
        minute=spec("minute", 0, 59),
        hour=spec("hour", 0, 23),
        dom=spec("day-of-month", 1, 31),
        month=spec("month", 1, 12, names=MONTH_NAMES),
        dow=dow,
        year=spec("year", MIN_YEAR, MAX_YEAR),
    )


STANDARD: Final = _fields(quartz=False)
QUARTZ: Final = _fields(quartz=True)

MACROS: Final = {
    "@YEARLY": "0 0 1 1 *",
    "@ANNUALLY": "0 0 1 1 *",
    "@MONTHLY": "0 0 1 * *",
    "@WEEKLY": "0 0 * * 0",
    "@DAILY": "0 0 * * *",
    "@MIDNIGHT": "0 0 * * *",
    "@HOURLY": "0 * * * *",
}

_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", re.ASCII)


def parse_every(text: str) -> int:
    """``@every`` durations: ``90s``, ``5m``, ``1h30m``, ``2d`` -> whole seconds (> 0)."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not text.strip() or match is None:
        raise InvalidInput(
            "expression", f"@every {text.strip()!r} is not a duration like 90s, 5m or 1h30m"
        )
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise InvalidInput("expression", "@every needs a duration of at least 1s")
    return total


def check_dialect(dialect: str) -> Dialect:
    """Return ``dialect`` if known, else raise an error naming ``dialect``."""
    if dialect == "standard":
        return "standard"
    if dialect == "quartz":
        return "quartz"
    raise InvalidInput("dialect", f"unknown dialect {dialect!r} (expected standard or quartz)")
