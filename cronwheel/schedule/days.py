"""Day-of-month and day-of-week: the specials (``L``, ``W``, ``#``, ``?``) and which
days of a given month match.

Every special depends only on the month's length and the weekday of its 1st, so the
matching days of a month are computed once per (length, weekday of the 1st): at most
28 combinations per expression.
"""

from __future__ import annotations

from dataclasses import dataclass

from cronwheel.schedule.fields import FieldSpec, parse_element


@dataclass(frozen=True)
class DomSpec:
    """A parsed day-of-month field.

    ``star`` is true when the field starts with ``*`` or is ``?``: it then joins the
    day-of-week field with AND (Vixie cron), otherwise with OR.
    """

    star: bool
    values: frozenset[int]
    last_offsets: frozenset[int]  # L -> 0, L-3 -> 3
    nearest: frozenset[int]  # 15W -> 15
    last_nearest: frozenset[int]  # LW -> 0, L-3W -> 3

    def days(self, length: int, first: int) -> set[int]:
        """The matching days of a month of ``length`` days whose 1st is weekday ``first``."""
        days = {d for d in self.values if d <= length}
        days.update(length - n for n in self.last_offsets if n < length)
        days.update(_nearest_weekday(n, length, first) for n in self.nearest if n <= length)
        days.update(
            _nearest_weekday(length - n, length, first) for n in self.last_nearest if n < length
        )
        return days


@dataclass(frozen=True)
class DowSpec:
    """A parsed day-of-week field; weekdays are numbered 0-6 from Sunday in both dialects."""

    star: bool
    weekdays: frozenset[int]
    nth: frozenset[tuple[int, int]]  # 5#3 -> (5, 3): the third Friday
    last: frozenset[int]  # 5L -> 5: the last Friday

    def days(self, length: int, first: int) -> set[int]:
        """The matching days of a month of ``length`` days whose 1st is weekday ``first``."""
        days = {d for d in range(1, length + 1) if (first + d - 1) % 7 in self.weekdays}
        for weekday, k in self.nth:
            day = 1 + (weekday - first) % 7 + 7 * (k - 1)
            if day <= length:
                days.add(day)
        for weekday in self.last:
            first_one = 1 + (weekday - first) % 7
            days.add(first_one + 7 * ((length - first_one) // 7))
        return days


def month_days(dom: DomSpec, dow: DowSpec, length: int, first: int) -> tuple[int, ...]:
    """Sorted matching days, with Vixie's rule: AND if either field is starred, else OR."""
    by_dom = dom.days(length, first)
    by_dow = dow.days(length, first)
    if dom.star or dow.star:
        return tuple(sorted(by_dom & by_dow))
    return tuple(sorted(by_dom | by_dow))


def _nearest_weekday(day: int, length: int, first: int) -> int:
    """The weekday (Mon-Fri) nearest to ``day``, never leaving the month (Quartz's ``W``)."""
    weekday = (first + day - 1) % 7
    if weekday == 6:  # Saturday: the Friday before, or the Monday after the 1st
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday: the Monday after, or the Friday before the last day
        return day + 1 if day < length else day - 2
    return day


def parse_dom(spec: FieldSpec, text: str) -> DomSpec:
    """Parse a day-of-month field: generic elements plus ``L``, ``L-n``, ``nW``, ``LW``."""
    if text == "?":
        return DomSpec(True, frozenset(range(1, 32)), frozenset(), frozenset(), frozenset())
    values: set[int] = set()
    last: set[int] = set()
    nearest: set[int] = set()
    last_nearest: set[int] = set()
    for raw in text.split(","):
        element = raw.upper()
        if element == "L":
            last.add(0)
        elif element == "LW":
            last_nearest.add(0)
        elif element.startswith("L-"):
            offset_text = element[2:]
            target = last_nearest if offset_text.endswith("W") else last
            target.add(_last_offset(spec, offset_text.removesuffix("W")))
        elif element.endswith("W") and "-" not in element and "/" not in element:
            nearest.add(spec.value(element[:-1]))
        else:
            values.update(parse_element(spec, raw))
    star = text.startswith("*")
    return DomSpec(
        star, frozenset(values), frozenset(last), frozenset(nearest), frozenset(last_nearest)
    )


def _last_offset(spec: FieldSpec, text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise spec.error(f"'L-{text}' needs a number of days before the last day")
    offset = int(text)
    if not 1 <= offset <= 30:
        raise spec.error(f"L-{offset}: the offset must be within 1-30")
    return offset


def parse_dow(spec: FieldSpec, text: str, *, quartz: bool) -> DowSpec:
    """Parse a day-of-week field: generic elements plus ``n#k``, ``nL`` (and Quartz's ``L``)."""
    if text == "?":
        return DowSpec(True, frozenset(range(7)), frozenset(), frozenset())
    weekdays: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for raw in text.split(","):
        element = raw.upper()
        if "#" in element:
            day_text, _, k_text = element.partition("#")
            nth.add((_weekday(spec, day_text, quartz), _nth(spec, k_text)))
        elif element == "L":
            if not quartz:
                raise spec.error(
                    "'L' alone is only meaningful in the quartz dialect (Saturday); "
                    "use 6 for Saturday or nL for the last weekday n of the month"
                )
            weekdays.add(6)
        elif element.endswith("L"):
            day_text = element[:-1]
            if not quartz and not (day_text.isascii() and day_text.isdigit()):
                raise spec.error(f"{raw!r}: 'L' must follow a weekday number, e.g. 5L")
            last.add(_weekday(spec, day_text, quartz))
        else:
            weekdays.update(_to_sunday_zero(v, quartz) for v in parse_element(spec, raw))
    star = text.startswith("*")
    return DowSpec(star, frozenset(weekdays), frozenset(nth), frozenset(last))


def _weekday(spec: FieldSpec, text: str, quartz: bool) -> int:
    return _to_sunday_zero(spec.value(text), quartz)


def _to_sunday_zero(value: int, quartz: bool) -> int:
    # Quartz numbers SUN-SAT as 1-7; the standard dialect as 0-6 with 7 for Sunday again.
    return value - 1 if quartz else value % 7


def _nth(spec: FieldSpec, text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise spec.error(f"'#{text}' needs a week number 1-5")
    k = int(text)
    if not 1 <= k <= 5:
        raise spec.error(f"#{k}: the week number must be within 1-5")
    return k
