"""The functions most callers need: next fire times, and validation for the API."""

from __future__ import annotations

from datetime import datetime

from cronwheel.schedule.cron import CronExpression
from cronwheel.schedule.occurrences import check_policies, occurrences


def next_times(
    expression: str,
    timezone: str,
    start: datetime,
    count: int,
    *,
    dialect: str = "standard",
    dst_gap: str = "gap_end",
    dst_overlap: str = "first",
) -> list[datetime]:
    """At most ``count`` fire times of ``expression`` strictly after the aware ``start``.

    The results are aware datetimes in ``timezone`` (an IANA name), strictly increasing;
    fewer than ``count`` (possibly none) if the expression stops firing. Bad input raises
    ``InvalidInput`` (a ``ValueError``) whose message names the field and the reason.
    Parsed expressions are cached, so calling this repeatedly does not re-parse.
    """
    expr = CronExpression.parse(expression, dialect)
    found = occurrences(expr, start, timezone, count, dst_gap=dst_gap, dst_overlap=dst_overlap)
    return [occurrence.at for occurrence in found]


def validate_cron(
    expression: str,
    dialect: str = "standard",
    *,
    dst_gap: str = "gap_end",
    dst_overlap: str = "first",
) -> CronExpression:
    """Parse and check an expression (and DST policy names) for the API; return it parsed."""
    check_policies(dst_gap, dst_overlap)
    return CronExpression.parse(expression, dialect)
