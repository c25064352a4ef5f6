"""Percentiles and summaries, in milliseconds for lags."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): the value at or below which q % fall.
    Nearest rank, not interpolation: p99 of 200 samples is a real sample, the 198th."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def lag_summary(lags_seconds: Sequence[float]) -> dict[str, float | int | None]:
    """p50/p95/p99/max/min of start lags, in ms."""
    values = sorted(lags_seconds)
    if not values:
        return {"samples": 0, "p50_ms": None, "p95_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "samples": len(values),
        "min_ms": round(values[0] * 1000, 3),
        "p50_ms": round(percentile(values, 50) * 1000, 3),
        "p95_ms": round(percentile(values, 95) * 1000, 3),
        "p99_ms": round(percentile(values, 99) * 1000, 3),
        "max_ms": round(values[-1] * 1000, 3),
    }
