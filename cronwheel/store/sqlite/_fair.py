"""Which runs a claim takes, fairly across tenants (decision 0028), on SQLite.

The same rule as PostgreSQL's CLAIM_RUNS, computed in the caller's write transaction:
the tenants with pending runs in the pools (a loose index scan of runs_fair, one probe
per tenant) share the batch in proportion to their claim_weight; each tenant's share is
read from its own slice of runs_fair in priority then due order, plus its runs of each
lower priority waiting longer than the aging period. Candidates are ranked within their
tenant by effective priority (one level higher per aging period waited), then taken
round by round; a batch the shares leave short is topped up from each tenant's runs past
its share, in priority order. A tenant with max_running takes at most its room.

Runs with a concurrency key (decision 0031) are not in the tenants' slices: the keys with
pending runs are found by a loose index scan of runs_keyed (one statement per key
waiting), and each key with room (its limit less its running runs, one probe of
runs_keyed_running) gives at most its room of runs, which then take their turns with
their tenant's others. A key at its limit holds back nothing but its own runs.

SQLite cannot stop a correlated subquery after a per-row count (its LIMIT takes no outer
column), so each (pool, tenant) slice is one indexed statement: in-process, no round
trip, and as many as tenants waiting, never one per run.
"""

from __future__ import annotations

import json
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
_COLUMNS = "r.id, r.tenant_id, r.priority, r.available_at, r.concurrency_key"


def _waiting(
    c: sqlite3.Connection, ask: Ask
) -> tuple[list[tuple[str, str, float, int | None]], set[str]]:
    """(pool, tenant, weight, room) of every tenant with pending runs without a key in
    the pools; room is what a tenant with max_running may still start (None: no cap).
    One writer at a time: the count is the cluster's. And the pools with keyed runs
    waiting (one probe of runs_keyed per pool, in the same statement): a claim that meets
    none runs no statement for keys."""
    tenant = "" if ask.tenant_id is None else " AND x.tenant_id = :tenant"
    pools = ", ".join(f"(:p{i})" for i in range(len(ask.pools)))
    found = c.execute(
        f"WITH RECURSIVE pools(pool) AS (VALUES {pools}),"
        " waiting(pool, tenant_id) AS ("
        " SELECT p.pool, (SELECT x.tenant_id FROM runs x INDEXED BY runs_fair"
        f" WHERE x.state = 'pending' AND x.concurrency_key IS NULL AND x.pool = p.pool{tenant}"
        " ORDER BY x.tenant_id LIMIT 1) FROM pools p"
        " UNION ALL"
        " SELECT w.pool, (SELECT x.tenant_id FROM runs x INDEXED BY runs_fair"
        " WHERE x.state = 'pending' AND x.concurrency_key IS NULL AND x.pool = w.pool"
        f" AND x.tenant_id > w.tenant_id{tenant}"
        " ORDER BY x.tenant_id LIMIT 1) FROM waiting w WHERE w.tenant_id IS NOT NULL)"
        " SELECT w.pool, w.tenant_id, ifnull(t.claim_weight, 1),"
        " max(0, t.max_running - (SELECT count(*) FROM runs x INDEXED BY runs_tenant_state"
        " WHERE x.tenant_id = w.tenant_id AND x.state = 'running')), 0"
        " FROM waiting w LEFT JOIN tenants t ON t.id = w.tenant_id"
        " WHERE w.tenant_id IS NOT NULL"
        " UNION ALL SELECT p.pool, NULL, NULL, NULL, 1 FROM pools p"
        " WHERE EXISTS (SELECT 1 FROM runs x INDEXED BY runs_keyed WHERE x.state = 'pending'"
        f" AND x.concurrency_key IS NOT NULL AND x.pool = p.pool{tenant})",
        {"tenant": ask.tenant_id, **{f"p{i}": p for i, p in enumerate(ask.pools)}},
    ).fetchall()
    keyed = {pool for pool, _, _, _, has_keys in found if has_keys}
    waiting = [
        (pool, tenant_id, float(weight), room)
        for pool, tenant_id, weight, room, has_keys in found
        if not has_keys
    ]
    return waiting, keyed


def _tenants(c: sqlite3.Connection, ids: list[str]) -> list[tuple[str, float, int | None]]:
    """(tenant, weight, room) of tenants waiting with keyed runs only, as _waiting has them
    for the others: a statement only when a claim meets keyed runs."""
    return [
        (tenant_id, float(weight), room)
        for tenant_id, weight, room in c.execute(
            "SELECT j.value, ifnull(t.claim_weight, 1),"
            " max(0, t.max_running - (SELECT count(*) FROM runs x INDEXED BY runs_tenant_state"
            " WHERE x.tenant_id = j.value AND x.state = 'running'))"
            " FROM json_each(?) j LEFT JOIN tenants t ON t.id = j.value",
            (json.dumps(ids),),
        )
    ]


# One tenant's slice: its first runs in priority then due order, and per lower priority
# its runs waiting past the aging period, oldest first (usually none), each up to share.
_SLICE = (
    f"SELECT * FROM (SELECT {_COLUMNS} FROM runs r INDEXED BY runs_fair"
    " WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.available_at <= :until"
    f" AND r.concurrency_key IS NULL AND {_CLAIMABLE}"
    " ORDER BY r.priority, r.available_at LIMIT :share)"
    + "".join(
        f" UNION SELECT * FROM (SELECT {_COLUMNS} FROM runs r INDEXED BY runs_fair"
        f" WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.priority = {p}"
        f" AND r.available_at <= :aged AND r.concurrency_key IS NULL AND {_CLAIMABLE}"
        " ORDER BY r.available_at LIMIT :share)"
        for p in (1, 2, 3)
    )
)


# Past its share, a tenant's next runs in the same order: the top-up of a short batch.
_PAST_SHARE = (
    f"SELECT {_COLUMNS} FROM runs r INDEXED BY runs_fair"
    " WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.available_at <= :until"
    f" AND r.concurrency_key IS NULL AND {_CLAIMABLE}"
    " ORDER BY r.priority, r.available_at LIMIT :limit OFFSET :share"
).replace("?", ":now")

# The next (tenant, key) with pending runs in a pool after the one given: one probe of
# runs_keyed (a step of a loose index scan), with the limit of the key's next run.
_NEXT_KEY = (
    "SELECT r.tenant_id, r.concurrency_key, r.concurrency_limit FROM runs r INDEXED BY runs_keyed"
    " WHERE r.state = 'pending' AND r.concurrency_key IS NOT NULL AND r.pool = :pool"
    " AND (r.tenant_id, r.concurrency_key) > (:tenant, :key){only}"
    " ORDER BY r.tenant_id, r.concurrency_key, r.priority, r.available_at LIMIT 1"
)

# What a key has running: one probe of runs_keyed_running.
_KEY_RUNNING = (
    "SELECT count(*), min(r.concurrency_limit) FROM runs r INDEXED BY runs_keyed_running"
    " WHERE r.tenant_id = ? AND r.concurrency_key = ? AND r.state = 'running'"
)

# A key's slice: its first runs in priority then due order, up to its room.
_KEY_SLICE = (
    f"SELECT {_COLUMNS} FROM runs r INDEXED BY runs_keyed"
    " WHERE r.pool = :pool AND r.tenant_id = :tenant AND r.concurrency_key = :key"
    f" AND r.available_at <= :until AND {_CLAIMABLE}"
    " ORDER BY r.priority, r.available_at LIMIT :room"
).replace("?", ":now")


def _keys(
    c: sqlite3.Connection, ask: Ask, pools: set[str]
) -> tuple[list[tuple[str, str, str]], dict[Key, int]]:
    """The (pool, tenant, key) with pending keyed runs in the pools, and each key's room:
    its limit (the smallest of its next pending run's and its running runs') less its
    running runs. One writer at a time: the count is the cluster's."""
    only = "" if ask.tenant_id is None else " AND r.tenant_id = :only"
    sql = _NEXT_KEY.format(only=only)
    found: list[tuple[str, str, str]] = []
    limits: dict[Key, int] = {}
    for pool in (p for p in ask.pools if p in pools):
        tenant, key = "", ""
        while True:
            params = {"pool": pool, "tenant": tenant, "key": key, "only": ask.tenant_id}
            row = c.execute(sql, params).fetchone()
            if row is None:
                break
            tenant, key, limit = row
            found.append((pool, tenant, key))
            limits[(tenant, key)] = min(limit, limits.get((tenant, key), limit))
    rooms: dict[Key, int] = {}
    for (tenant, key), limit in limits.items():
        running, running_limit = c.execute(_KEY_RUNNING, (tenant, key)).fetchone()
        lowest = limit if running_limit is None else min(limit, running_limit)
        rooms[(tenant, key)] = max(0, lowest - running)
    return found, rooms


Key = tuple[str, str]
"""A concurrency key as it is counted: its tenant's and its own."""


def picks(c: sqlite3.Connection, ask: Ask) -> list[Pick]:
    """The runs to claim, in the order they are taken (fair rounds, then top-up)."""
    waiting, keyed_pools = _waiting(c, ask)
    weights = {tenant: weight for _, tenant, weight, _ in waiting}
    rooms = {tenant: room for _, tenant, _, room in waiting if room is not None}
    keys, key_rooms = _keys(c, ask, keyed_pools) if keyed_pools else ([], {})
    keyed_only = sorted({tenant for _, tenant, _ in keys} - weights.keys())
    if keyed_only:
        for tenant, weight, room in _tenants(c, keyed_only):
            weights[tenant] = weight
            if room is not None:
                rooms[tenant] = room
    total = sum(weights.values())
    candidates: dict[int, tuple[str, int, int, str | None]] = {}
    shares: list[tuple[str, str, int]] = []
    sql = _SLICE.replace("?", ":now")
    for pool, tenant, weight, _ in waiting:
        share = min(math.ceil(ask.limit * weight / total), rooms.get(tenant, ask.limit))
        if share <= 0:
            continue
        shares.append((pool, tenant, share))
        params = {
            "pool": pool,
            "tenant": tenant,
            "until": ask.until,
            "aged": min(ask.until, ask.now - ask.aging),
            "share": share,
            "now": ask.now,  # OVERLAP_CLAIMABLE's two instants
        }
        for run_id, tenant_id, priority, available_at, key in c.execute(sql, params):
            candidates[run_id] = (tenant_id, priority, available_at, key)
    for pool, tenant, key in keys:
        room = min(key_rooms[(tenant, key)], ask.limit)
        if room <= 0:
            continue
        params = {
            "pool": pool,
            "tenant": tenant,
            "key": key,
            "until": ask.until,
            "room": room,
            "now": ask.now,
        }
        for run_id, tenant_id, priority, available_at, k in c.execute(_KEY_SLICE, params):
            candidates[run_id] = (tenant_id, priority, available_at, k)
    by_tenant: dict[str, list[tuple[int, int, int]]] = {}
    for run_id, (tenant_id, priority, available_at, _) in candidates.items():
        waited = max(0, ask.now - available_at) // ask.aging
        effective = max(0, priority - waited)
        by_tenant.setdefault(tenant_id, []).append((effective, available_at, run_id))
    ranked: list[tuple[float, int, int, int]] = []
    for tenant_id, runs in by_tenant.items():
        runs.sort()
        weight = weights.get(tenant_id, 1.0)
        # A key's room holds across its pools (an overlap head counts too), and so does
        # a capped tenant's.
        used: dict[str, int] = {}
        kept = []
        for entry in runs:
            key = candidates[entry[2]][3]
            if key is not None:
                if used.get(key, 0) >= key_rooms.get((tenant_id, key), 0):
                    continue
                used[key] = used.get(key, 0) + 1
            kept.append(entry)
        for k, (_, available_at, run_id) in enumerate(kept[: rooms.get(tenant_id)]):
            ranked.append((k / weight, candidates[run_id][1], available_at, run_id))
    ranked.sort()
    chosen = [Pick(run_id, turn) for turn, _, _, run_id in ranked[: ask.limit]]
    if len(chosen) < ask.limit:
        chosen += _top_up(c, ask, shares, rooms, chosen)
    return chosen


def _top_up(
    c: sqlite3.Connection,
    ask: Ask,
    shares: list[tuple[str, str, int]],
    rooms: dict[str, int],
    chosen: list[Pick],
) -> list[Pick]:
    """A batch the shares left short takes each tenant's runs past its share, in priority
    order, a capped tenant's only within its room."""
    deficit = ask.limit - len(chosen)
    taken = {p.id for p in chosen}
    left = dict(rooms)
    more: list[tuple[int, int, int, str]] = []
    for pool, tenant, share in shares:
        params = {
            "pool": pool,
            "tenant": tenant,
            "until": ask.until,
            "now": ask.now,
            "share": share,
            "limit": deficit,
        }
        for run_id, tenant_id, priority, available_at, _ in c.execute(_PAST_SHARE, params):
            if run_id not in taken:
                more.append((priority, available_at, run_id, tenant_id))
    more.sort()
    # What the shares already took counts against each capped tenant's room.
    if rooms:
        for (tenant_id,) in c.execute(
            "SELECT tenant_id FROM runs WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(taken)),),
        ):
            if tenant_id in left:
                left[tenant_id] -= 1
    found: list[Pick] = []
    for _, _, run_id, tenant_id in more:
        if tenant_id in left:
            if left[tenant_id] <= 0:
                continue
            left[tenant_id] -= 1
        found.append(Pick(run_id, math.inf))
        if len(found) == deficit:
            break
    return found
