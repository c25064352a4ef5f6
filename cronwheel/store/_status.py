"""What both stores share of :meth:`~cronwheel.store.base.Store.pool_status` (the four
per-pool reads are merged into one :class:`~cronwheel.store.base.PoolStatus` per pool)
and of :meth:`~cronwheel.store.base.Store.attempt_history`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from cronwheel.store.base import MAX_HISTORY_BUCKETS, AttemptBucket, GaugeReading, PoolStatus


def merge(*parts: Iterable[Mapping[str, Any]]) -> list[PoolStatus]:
    """Rows of ``{"pool": ..., <PoolStatus field>: ...}``, merged by pool, by pool name."""
    pools: dict[str, PoolStatus] = {}
    for rows in parts:
        for row in rows:
            values = {k: v for k, v in row.items() if k != "pool"}
            pools[row["pool"]] = replace(pools.get(row["pool"], PoolStatus(row["pool"])), **values)
    return [pools[name] for name in sorted(pools)]


def bucket_micros(since: datetime, now: datetime, bucket_seconds: int) -> int:
    """The width of a history bucket in microseconds, once the request is checked: a
    positive width, and not so many buckets that the answer is unbounded."""
    if bucket_seconds < 1:
        raise ValueError(f"bucket_seconds must be at least 1, not {bucket_seconds}")
    if now < since:
        raise ValueError("the history's end (now) is before its start (since)")
    width = bucket_seconds * 1_000_000
    span = (now - since) // timedelta(microseconds=1)
    if -(-span // width) > MAX_HISTORY_BUCKETS:
        raise ValueError(
            f"{span / width:.0f} buckets asked for; at most {MAX_HISTORY_BUCKETS} are answered"
        )
    return width


def buckets(found: Iterable[Mapping[str, Any]]) -> list[AttemptBucket]:
    """Rows of ``pool, bucket, finished, failures`` as :class:`AttemptBucket`, in order."""
    out = [
        AttemptBucket(r["pool"], int(r["bucket"]), int(r["finished"]), int(r["failures"]))
        for r in found
    ]
    return sorted(out, key=lambda b: (b.pool, b.bucket))


def held_by(result: GaugeReading, pool: str, by_key: int | None, by_overlap: int | None) -> None:
    """Add one due row's held runs to ``result.held`` (both stores' read_gauges)."""
    for reason, n in (("concurrency_key", by_key), ("overlap_queue", by_overlap)):
        if n:
            result.held[(pool, reason)] = result.held.get((pool, reason), 0) + int(n)
