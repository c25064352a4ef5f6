"""The metrics scrape's one read (:meth:`Store.read_gauges`) on SQLite: the same
statement as PostgreSQL's (see cronwheel/store/postgres/_gauges.py), over the same
partial indexes, named (``INDEXED BY``): SQLite would otherwise count dead runs by
scanning the covering ``runs_tenant_state``, every run of the history."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from cronwheel.core.model import SCHEDULER_TENANT
from cronwheel.store._status import held_by
from cronwheel.store.base import GaugeReading
from cronwheel.store.sqlite import _rows as rows
from cronwheel.store.sqlite._status import HELD_BY_KEY, HELD_BY_OVERLAP

# The due part flags the runs a limit holds back (decision 0042): they are counted, and
# apart, but are not the pool's oldest due run.
READ_GAUGES = f"""
SELECT 'due' AS part, pool, priority, NULL AS tenant, count(*) AS n,
       min(CASE WHEN held_key OR held_overlap THEN NULL ELSE available_at END) AS oldest,
       sum(held_key) AS held_key, sum(held_overlap AND NOT held_key) AS held_overlap
FROM (
    SELECT r.pool AS pool, r.priority AS priority, r.available_at AS available_at,
           {HELD_BY_KEY} AS held_key, {HELD_BY_OVERLAP} AS held_overlap
    FROM runs r INDEXED BY runs_claimable
    WHERE r.state = 'pending' AND r.available_at <= ?
) GROUP BY pool, priority
UNION ALL
SELECT 'running', pool, NULL, NULL, count(*), NULL, NULL, NULL
FROM runs INDEXED BY runs_leases WHERE state = 'running' GROUP BY pool
UNION ALL
SELECT 'dead', NULL, NULL, tenant_id, count(*), NULL, NULL, NULL
FROM runs INDEXED BY runs_dead WHERE state = 'dead' GROUP BY tenant_id
UNION ALL
SELECT 'workers', p.value, NULL, NULL, count(*), NULL, NULL, NULL
FROM workers AS w, json_each(w.pools) AS p
WHERE w.last_seen_at >= ? AND w.tenant_id <> ? GROUP BY p.value"""


def read(c: sqlite3.Connection, now: datetime, workers_seen_since: datetime) -> GaugeReading:
    result = GaugeReading(read_at=now, due={}, oldest_due={}, running={}, dead={}, workers={})
    params = (rows.us(now), rows.us(workers_seen_since), SCHEDULER_TENANT)
    for part, pool, priority, tenant, n, oldest, *held in c.execute(READ_GAUGES, params):
        if part == "due":
            result.due[(pool, int(priority))] = n
            held_by(result, pool, *held)
            at = rows.dt_or_none(oldest)
            if at is not None and (pool not in result.oldest_due or at < result.oldest_due[pool]):
                result.oldest_due[pool] = at
        elif part == "running":
            result.running[pool] = n
        elif part == "dead":
            result.dead[tenant] = n
        else:
            result.workers[pool] = n
    return result
