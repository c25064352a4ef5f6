"""Which runs a claim takes, fairly across tenants (decision 0028), on SQLite.

The same rule as PostgreSQL's CLAIM_RUNS, computed in the caller's write transaction:
the tenants with pending runs in the pools (a loose index scan of runs_fair, one probe
per tenant) share the batch in proportion to their claim_weight; each tenant's share is
read from its own slice of runs_fair in priority then due order, plus its runs of each
lower priority waiting longer than the aging period. Candidates are ranked within their
tenant by effective priority (one level higher per aging period waited), then taken
round by round; a batch the shares leave short is topped up in plain priority order.

SQLite cannot stop a correlated subquery after a per-row count (its LIMIT takes no outer
column), so each (pool, tenant) slice is one indexed statement: in-process, no round
trip, and as many as tenants waiting, never one per run.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from cronwheel.store.sqlite import _ops as ops


@dataclass(frozen=True, slots=True)
class Pick:
    """A claimable run and the round it is taken in."""

    id: int
    turn: float


@dataclass(frozen=True, slots=True)
class Ask:
    """One claim's inputs, instants in microseconds."""

    pools: Sequence[str]
    tenant_id: str | None
    limit: int
    now: int
    until: int
    aging: int
    """The priority aging period, microseconds (at least 1)."""


# A pending run of these pools this claim may start: its budget not spent, and either
# without overlap policy or its job's claimable head (ops.OVERLAP_CLAIMABLE, alias r).
_CLAIMABLE = (
    "r.state = 'pending' AND r.attempt < r.max_attempts"
    f" AND (r.overlap = 'allow' OR ({ops.OVERLAP_CLAIMABLE}))"
)
_COLUMNS = "r.id, r.tenant_id, r.priority, r.available_at"


def _waiting(c: sqlite3.Connection, ask: Ask) -> list[tuple[str, str, float]]:
    """(pool, tenant, weight) of every tenant with pending runs in the pools."""
    tenant = "" if ask.tenant_id is None else " AND x.tenant_id = :tenant"
    pools = ", ".join(f"(:p{i})" for i in range(len(ask.pools)))
    found = c.execute(
        f"WITH RECURSIVE pools(pool) AS (VALUES {pools}),"
        " waiting(pool, tenant_id) AS ("
        " SELECT p.pool, (SELECT x.tenant_id FROM runs x INDEXED BY runs_fair"
        f" WHERE x.state = 'pending' AND x.pool = p.pool{tenant}"
        " ORDER BY x.tenant_id LIMIT 1) FROM pools p"
        " UNION ALL"
        " SELECT w.pool, (SELECT x.tenant_id FROM runs x INDEXED BY runs_fair"
        f" WHERE x.state = 'pending' AND x.pool = w.pool AND x.tenant_id > w.tenant_id{tenant}"
        " ORDER BY x.tenant_id LIMIT 1) FROM waiting w WHERE w.tenant_id IS NOT NULL)"
        " SELECT w.pool, w.tenant_id,"
        " ifnull((SELECT t.claim_weight FROM tenants t WHERE t.id = w.tenant_id), 1)"
        " FROM waiting w WHERE w.tenant_id IS NOT NULL",
        {"tenant": ask.tenant_id, **{f"p{i}": p for i, p in enumerate(ask.pools)}},
    ).fetchall()
    return [(pool, tenant_id, float(weight)) for pool, tenant_id, weight in found]


# One tenant's slice: its first runs in priority then due order, and per lower priority
# its runs waiting past the aging period, oldest first (usually none), each up to share.
_SLICE = (
    f"SELECT * FROM (SELECT {_COLUMNS} FROM runs r INDEXED BY runs_fair"
    " WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.available_at <= :until"
    f" AND {_CLAIMABLE} ORDER BY r.priority, r.available_at LIMIT :share)"
    + "".join(
        f" UNION SELECT * FROM (SELECT {_COLUMNS} FROM runs r INDEXED BY runs_fair"
        f" WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.priority = {p}"
        f" AND r.available_at <= :aged AND {_CLAIMABLE}"
        " ORDER BY r.available_at LIMIT :share)"
        for p in (1, 2, 3)
    )
)


def picks(c: sqlite3.Connection, ask: Ask) -> list[Pick]:
    """The runs to claim, in the order they are taken (fair rounds, then top-up)."""
    waiting = _waiting(c, ask)
    weights = {tenant: weight for _, tenant, weight in waiting}
    total = sum(weights.values())
    candidates: dict[int, tuple[str, int, int]] = {}
    for pool, tenant, weight in waiting:
        share = math.ceil(ask.limit * weight / total)
        params = {
            "pool": pool,
            "tenant": tenant,
            "until": ask.until,
            "aged": min(ask.until, ask.now - ask.aging),
            "share": share,
            # OVERLAP_CLAIMABLE's two instants (positional in its text) are "now".
        }
        sql = _SLICE.replace("?", ":now")
        for run_id, tenant_id, priority, available_at in c.execute(sql, params | {"now": ask.now}):
            candidates[run_id] = (tenant_id, priority, available_at)
    by_tenant: dict[str, list[tuple[int, int, int]]] = {}
    for run_id, (tenant_id, priority, available_at) in candidates.items():
        waited = max(0, ask.now - available_at) // ask.aging
        effective = max(0, priority - waited)
        by_tenant.setdefault(tenant_id, []).append((effective, available_at, run_id))
    ranked: list[tuple[float, int, int, int]] = []
    for tenant_id, runs in by_tenant.items():
        runs.sort()
        weight = weights.get(tenant_id, 1.0)
        for k, (_, available_at, run_id) in enumerate(runs):
            ranked.append((k / weight, candidates[run_id][1], available_at, run_id))
    ranked.sort()
    chosen = [Pick(run_id, turn) for turn, _, _, run_id in ranked[: ask.limit]]
    if len(chosen) < ask.limit:
        chosen += _top_up(c, ask, {p.id for p in chosen})
    return chosen


def _top_up(c: sqlite3.Connection, ask: Ask, taken: set[int]) -> list[Pick]:
    """What a batch the shares left short takes next: plain priority order."""
    tenant = "" if ask.tenant_id is None else " AND r.tenant_id = :tenant"
    pools = ", ".join(f":p{i}" for i in range(len(ask.pools)))
    sql = (
        f"SELECT r.id FROM runs r INDEXED BY runs_claimable WHERE r.pool IN ({pools}){tenant}"
        f" AND r.available_at <= :until AND {_CLAIMABLE}"
        " ORDER BY r.priority, r.available_at, r.id LIMIT :limit"
    ).replace("?", ":now")
    params = {
        "tenant": ask.tenant_id,
        "until": ask.until,
        "now": ask.now,
        "limit": ask.limit,
        **{f"p{i}": p for i, p in enumerate(ask.pools)},
    }
    room = ask.limit - len(taken)
    found = [run_id for (run_id,) in c.execute(sql, params) if run_id not in taken]
    return [Pick(run_id, math.inf) for run_id in found[:room]]
