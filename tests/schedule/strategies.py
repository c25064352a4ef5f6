"""Hypothesis strategies: random standard-dialect expressions together with their
meaning as plain predicates (an :class:`OracleCron`), built without the engine."""

from __future__ import annotations

from datetime import date

from hypothesis import strategies as st

from tests.schedule.oracle import DayRule, OracleCron, cron_weekday, month_length, nearest_weekday

Field = tuple[str, frozenset[int]]
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


@st.composite
def generic_field(draw: st.DrawFn, low: int, high: int, star_high: int | None = None) -> Field:
    """``*``, ``*/n``, ``a``, ``a-b``, ``a-b/n``, ``a/n`` or a list of the non-star ones."""
    top = high if star_high is None else star_high
    kind = draw(st.sampled_from(["star", "star_step", "list", "single", "range", "step"]))
    if kind == "star":
        return "*", frozenset(range(low, top + 1))
    if kind == "star_step":
        n = draw(st.integers(1, top - low + 1))
        return f"*/{n}", frozenset(range(low, top + 1, n))
    if kind == "list":
        parts = draw(st.lists(_element(low, high, top), min_size=2, max_size=3))
        return ",".join(p[0] for p in parts), frozenset().union(*(p[1] for p in parts))
    return draw(_element(low, high, top, kind))


@st.composite
def _element(draw: st.DrawFn, low: int, high: int, top: int, kind: str | None = None) -> Field:
    kind = kind or draw(st.sampled_from(["single", "range", "step"]))
    a = draw(st.integers(low, high))
    if kind == "single":
        return str(a), frozenset({a})
    if kind == "step":
        n = draw(st.integers(1, max(1, top - low)))
        return f"{a}/{n}", frozenset(range(a, max(a, top) + 1, n))
    b = draw(st.integers(a, high))
    n = draw(st.integers(1, max(1, b - a + 1)))
    if n == 1:
        return f"{a}-{b}", frozenset(range(a, b + 1))
    return f"{a}-{b}/{n}", frozenset(range(a, b + 1, n))


def _picks(*texts: str, low: int, high: int) -> list[Field]:
    """Hand-picked fields (values computed here, independently of the engine)."""
    fields: list[Field] = []
    for text in texts:
        values: set[int] = set()
        for part in text.split(","):
            base, _, step = part.partition("/")
            a, _, b = base.partition("-")
            first, last = (low, high) if a == "*" else (int(a), int(b or a))
            values.update(range(first, last + 1, int(step or 1)))
        fields.append((text, frozenset(values)))
    return fields


# Fields that often land in the 00:00-04:00 local hours where DST transitions happen.
MINUTES = _picks("0", "30", "15,45", "*/20", "*", "10-50/20", "0-5", low=0, high=59)
HOURS = _picks("1", "2", "1-3", "0-4/2", "2,3", "*", "*/2", "0-23/3", "1,2", low=0, high=23)


def _field(picks: list[Field], low: int, high: int) -> st.SearchStrategy[Field]:
    return st.one_of(st.sampled_from(picks), generic_field(low, high))


def _rarely(
    strategy: st.SearchStrategy[tuple[str, DayRule]],
) -> st.SearchStrategy[tuple[str, DayRule]]:
    """``*`` three times out of four: keeps random expressions firing in short windows."""
    star: tuple[str, DayRule] = ("*", _always)
    return st.sampled_from([star, star, star, None]).flatmap(
        lambda picked: st.just(picked) if picked is not None else strategy
    )


@st.composite
def dom_field(draw: st.DrawFn) -> tuple[str, DayRule]:
    kind = draw(st.sampled_from(["generic", "generic", "L", "L-n", "nW", "LW"]))
    if kind == "generic":
        text, values = draw(generic_field(1, 31))
        return text, lambda d: d.day in values
    if kind == "L":
        return "L", lambda d: d.day == month_length(d)
    if kind == "L-n":
        n = draw(st.integers(1, 27))
        return f"L-{n}", lambda d: d.day == month_length(d) - n
    if kind == "LW":
        return "LW", lambda d: nearest_weekday(d, month_length(d))
    n = draw(st.integers(1, 31))
    return f"{n}W", lambda d: nearest_weekday(d, n)


@st.composite
def dow_field(draw: st.DrawFn) -> tuple[str, DayRule]:
    kind = draw(st.sampled_from(["generic", "generic", "generic", "nth", "last"]))
    if kind == "generic":
        text, values = draw(generic_field(0, 7, star_high=6))
        weekdays = {v % 7 for v in values}
        if draw(st.booleans()) and text.isdigit() and int(text) < 7:
            text = DAY_NAMES[int(text)].lower()
        return text, lambda d: cron_weekday(d) in weekdays
    weekday = draw(st.integers(0, 6))
    if kind == "nth":
        k = draw(st.integers(1, 5))
        return f"{weekday}#{k}", lambda d: cron_weekday(d) == weekday and (d.day - 1) // 7 + 1 == k
    return f"{weekday}L", lambda d: cron_weekday(d) == weekday and d.day + 7 > month_length(d)


@st.composite
def expressions(draw: st.DrawFn, with_seconds: bool = False) -> OracleCron:
    """A random standard-dialect expression (5 fields, or 6 with leading seconds)."""
    seconds = draw(generic_field(0, 59)) if with_seconds else None
    minute = draw(_field(MINUTES, 0, 59))
    hour = draw(_field(HOURS, 0, 23))
    dom_text, dom = draw(_rarely(dom_field()))
    all_months = ("*", frozenset(range(1, 13)))
    month_text, months = draw(
        st.sampled_from([all_months, all_months, None]).flatmap(
            lambda picked: st.just(picked) if picked is not None else generic_field(1, 12)
        )
    )
    dow_text, dow = draw(_rarely(dow_field()))
    parts = [minute[0], hour[0], dom_text, month_text, dow_text]
    if seconds is not None:
        parts.insert(0, seconds[0])
    return OracleCron(
        text=" ".join(parts),
        seconds=None if seconds is None else seconds[1],
        minutes=minute[1],
        hours=hour[1],
        months=months,
        dom=dom,
        dow=dow,
        dom_star=dom_text.startswith("*"),
        dow_star=dow_text.startswith("*"),
        fixed_time=not minute[0].startswith("*")
        and not hour[0].startswith("*")
        and (seconds is None or seconds[1] == frozenset({0})),
    )


def _always(day: date) -> bool:
    return True


@st.composite
def fixed_time_expressions(draw: st.DrawFn) -> OracleCron:
    """Fixed-time jobs in the small hours, where the DST policies matter most."""
    minute = draw(st.sampled_from([m for m in MINUTES if not m[0].startswith("*")]))
    hour = draw(st.sampled_from([h for h in HOURS if not h[0].startswith("*")]))
    dow_text, dow = draw(_rarely(dow_field()))
    return OracleCron(
        text=f"{minute[0]} {hour[0]} * * {dow_text}",
        seconds=None,
        minutes=minute[1],
        hours=hour[1],
        months=frozenset(range(1, 13)),
        dom=_always,
        dow=dow,
        dom_star=True,
        dow_star=dow_text.startswith("*"),
        fixed_time=True,
    )
