"""The metrics scrape's one read (:meth:`Store.read_gauges`) on PostgreSQL.

Every part of the statement reads a partial index of the rows it counts: due runs
through ``runs_claimable`` (pending), running runs through ``runs_leases`` (running),
dead runs through ``runs_dead`` (migration 0006), live workers through
``workers_last_seen``. At rest with a million finished runs, it touches none of them
(tests/store/test_postgres_specific.py asserts the plan).
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from cronwheel.store._status import held_by
from cronwheel.store.base import GaugeReading
from cronwheel.store.postgres._status import HELD_BY_KEY, HELD_BY_OVERLAP

# $1 now, $2 workers seen since, $3 the schedulers' tenant (they are not workers)
# The due part flags the runs a limit holds back (decision 0042): they are counted, and
# apart, but are not the pool's oldest due run.
READ_GAUGES = f"""
SELECT 'due' AS part, pool, priority, NULL::text AS tenant, count(*) AS n,
       min(available_at) FILTER (WHERE NOT held_key AND NOT held_overlap) AS oldest,
       count(*) FILTER (WHERE held_key) AS held_key,
       count(*) FILTER (WHERE held_overlap AND NOT held_key) AS held_overlap
FROM (
    SELECT r.pool, r.priority, r.available_at,
           {HELD_BY_KEY} AS held_key, {HELD_BY_OVERLAP} AS held_overlap
    FROM runs r WHERE r.state = 'pending' AND r.available_at <= $1
) AS d GROUP BY pool, priority
UNION ALL
SELECT 'running', pool, NULL, NULL, count(*), NULL, NULL, NULL
FROM runs WHERE state = 'running' GROUP BY pool
UNION ALL
SELECT 'dead', NULL, NULL, tenant_id, count(*), NULL, NULL, NULL
FROM all_runs WHERE state = 'dead' GROUP BY tenant_id
UNION ALL
SELECT 'workers', p.pool, NULL, NULL, count(*), NULL, NULL, NULL
FROM workers AS w CROSS JOIN LATERAL jsonb_array_elements_text(w.pools) AS p(pool)
WHERE w.last_seen_at >= $2 AND w.tenant_id <> $3 GROUP BY p.pool"""


def reading(records: list[asyncpg.Record], now: datetime) -> GaugeReading:
    """The statement's rows as a :class:`GaugeReading`."""
    result = GaugeReading(read_at=now, due={}, oldest_due={}, running={}, dead={}, workers={})
    for r in records:
        part, n = r["part"], int(r["n"])
        if part == "due":
            pool = r["pool"]
            result.due[(pool, int(r["priority"]))] = n
            held_by(result, pool, r["held_key"], r["held_overlap"])
            oldest = result.oldest_due.get(pool)
            if r["oldest"] is not None and (oldest is None or r["oldest"] < oldest):
                result.oldest_due[pool] = r["oldest"]
        elif part == "running":
            result.running[r["pool"]] = n
        elif part == "dead":
            result.dead[r["tenant"]] = n
        else:
            result.workers[r["pool"]] = n
    return result
