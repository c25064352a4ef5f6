"""Small helpers shared by the schedule tests."""

from __future__ import annotations

from datetime import datetime

from cronwheel.schedule import next_times


def fires(
    expr: str,
    start: str,
    count: int = 3,
    tz: str = "UTC",
    *,
    dialect: str = "standard",
    dst_gap: str = "gap_end",
    dst_overlap: str = "first",
) -> list[str]:
    """The next fire times as local ISO strings (with their offsets)."""
    found = next_times(
        expr,
        tz,
        datetime.fromisoformat(start),
        count,
        dialect=dialect,
        dst_gap=dst_gap,
        dst_overlap=dst_overlap,
    )
    return [f.isoformat() for f in found]
