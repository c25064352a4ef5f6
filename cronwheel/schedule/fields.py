"""One cron field: its name, its range, its names, and parsing it into a set of values.

Only the generic grammar lives here (``*``, values, names, ranges, steps, lists); the
day-of-month and day-of-week specials (``L``, ``W``, ``#``, ``?``) are in :mod:`.days`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cronwheel.errors import InvalidInput

MONTH_NAMES: Mapping[str, int] = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
WEEKDAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")

# The year field is bounded like Quartz's (it keeps searches finite and values sane).
MIN_YEAR = 1970
MAX_YEAR = 2199


@dataclass(frozen=True)
class FieldSpec:
    """The rules of one field in one dialect.

    ``star_high`` is where ``*`` and ``a/n`` stop: day-of-week accepts 7 as an alias of
    Sunday in the standard dialect, but ``*/2`` must not count Sunday twice, so ``*``
    covers 0-6 there. ``wrap`` lets ``22-2`` mean ``22,23,0,1,2`` (Quartz does this);
    ``max_step`` mirrors Quartz's refusal of increments larger than the field.
    ``bare_step`` accepts Quartz's ``/5`` as ``*/5``.
    """

    name: str
    low: int
    high: int
    star_high: int
    names: Mapping[str, int] = field(default_factory=dict)
    wrap: bool = False
    max_step: int | None = None
    bare_step: bool = False

    def error(self, reason: str) -> InvalidInput:
        """An error naming this field."""
        return InvalidInput(self.name, reason)

    def value(self, text: str) -> int:
        """One value: ASCII digits or a name (any case), within the field's range."""
        name = self.names.get(text.upper())
        if name is not None:
            return name
        # isdigit() alone would accept '¹' and other non-ASCII digits.
        if not (text.isascii() and text.isdigit()):
            return self._not_a_value(text)
        number = int(text)
        if not self.low <= number <= self.high:
            raise self.error(f"{number} is out of range {self.low}-{self.high}")
        return number

    def _not_a_value(self, text: str) -> int:
        if not text:
            raise self.error("a value is missing")
        if self.names:
            first, last = _name_span(self.names)
            raise self.error(f"{text!r} is not a number or a name ({first}-{last})")
        raise self.error(f"{text!r} is not a number")

    def step(self, text: str) -> int:
        """The ``n`` of ``/n``: a positive integer (bounded by the field in Quartz)."""
        if not (text.isascii() and text.isdigit()):
            raise self.error(f"step {text!r} is not a positive integer")
        number = int(text)
        if number == 0:
            raise self.error("step 0 is not allowed")
        if self.max_step is not None and number > self.max_step:
            raise self.error(f"step {number} is out of range 1-{self.max_step}")
        return number


def _name_span(names: Mapping[str, int]) -> tuple[str, str]:
    ordered = sorted(names, key=names.__getitem__)
    return ordered[0], ordered[-1]


def parse_values(spec: FieldSpec, text: str) -> frozenset[int]:
    """Parse a comma-separated list of ``*``, values, ranges and steps."""
    values: set[int] = set()
    for element in text.split(","):
        values.update(parse_element(spec, element))
    return frozenset(values)


def parse_element(spec: FieldSpec, element: str) -> range | list[int]:
    """One list element: ``*``, ``a``, ``a-b``, each optionally followed by ``/n``."""
    if not element:
        raise spec.error("empty element in list")
    base, slash, step_text = element.partition("/")
    step = spec.step(step_text) if slash else 1
    if base == "*" or (base == "" and slash and spec.bare_step):
        return range(spec.low, spec.star_high + 1, step)
    if "-" in base:
        start_text, _, end_text = base.partition("-")
        return _range(spec, spec.value(start_text), spec.value(end_text), step)
    start = spec.value(base)
    if slash:
        # 'a/n' runs from a to the top of the field, like Vixie's 'a-max/n'.
        return range(start, max(start, spec.star_high) + 1, step)
    return [start]


def _range(spec: FieldSpec, start: int, end: int, step: int) -> range | list[int]:
    if start <= end:
        return range(start, end + 1, step)
    if not spec.wrap:
        raise spec.error(
            f"range {start}-{end} runs backwards "
            "(write it as two ranges; wrap-around ranges are a quartz-dialect feature)"
        )
    # Quartz: count on past the top of the field and fold back to its bottom.
    span = spec.high - spec.low + 1
    return [spec.low + (v - spec.low) % span for v in range(start, end + span + 1, step)]
