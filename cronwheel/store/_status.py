"""What both stores share of :meth:`~cronwheel.store.base.Store.pool_status`: the four
per-pool reads are merged into one :class:`~cronwheel.store.base.PoolStatus` per pool."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from cronwheel.store.base import PoolStatus


def merge(*parts: Iterable[Mapping[str, Any]]) -> list[PoolStatus]:
    """Rows of ``{"pool": ..., <PoolStatus field>: ...}``, merged by pool, by pool name."""
    pools: dict[str, PoolStatus] = {}
    for rows in parts:
        for row in rows:
            values = {k: v for k, v in row.items() if k != "pool"}
            pools[row["pool"]] = replace(pools.get(row["pool"], PoolStatus(row["pool"])), **values)
    return [pools[name] for name in sorted(pools)]
