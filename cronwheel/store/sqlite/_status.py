"""The reads of ``cronwheel status`` on SQLite, each through an index (see migration
0006), never a scan of the runs or attempts table."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from cronwheel.core.model import JobState, Run, WorkerInfo
from cronwheel.store import _status as status
from cronwheel.store.base import FAILED_OUTCOMES, AttemptBucket, PoolStatus
from cronwheel.store.sqlite import _rows as rows
from cronwheel.store.sqlite._ops import JOB_IS_BUSY

_FAILED = ", ".join(f"'{outcome}'" for outcome in FAILED_OUTCOMES)

# The percentiles are the nearest rank, as PostgreSQL's percentile_disc: the value of
# rank ceil(p * n), in integer arithmetic (SQLite may lack ceil()).
_RECENT = f"""
WITH window_attempts AS (
    SELECT r.pool AS pool, a.outcome AS outcome, a.lag_seconds AS lag
    FROM attempts a JOIN runs r ON r.id = a.run_id
    WHERE a.finished_at > :since AND a.finished_at <= :now
      AND (:tenant IS NULL OR a.tenant_id = :tenant)
),
ranked AS (
    SELECT pool, lag,
           row_number() OVER (PARTITION BY pool ORDER BY lag) AS k,
           count(*) OVER (PARTITION BY pool) AS n
    FROM window_attempts WHERE lag IS NOT NULL
)
SELECT w.pool AS pool, count(*) AS finished,
       sum(w.outcome IN ({_FAILED})) AS failures,
       (SELECT lag FROM ranked WHERE ranked.pool = w.pool AND k = (n + 1) / 2) AS lag_p50,
       (SELECT lag FROM ranked WHERE ranked.pool = w.pool AND k = (99 * n + 99) / 100)
           AS lag_p99
FROM window_attempts w GROUP BY w.pool
"""
_TENANT = "(:tenant IS NULL OR tenant_id = :tenant)"

HELD_BY_KEY = (
    "CASE WHEN r.concurrency_key IS NULL THEN 0 ELSE ("
    "SELECT count(*) >= min(coalesce(r.concurrency_limit, 1),"
    " coalesce(min(k.concurrency_limit), r.concurrency_limit, 1))"
    " FROM runs k INDEXED BY runs_keyed_running"
    " WHERE k.tenant_id = r.tenant_id AND k.concurrency_key = r.concurrency_key"
    " AND k.state = 'running') END"
)
"""1 for a due run whose concurrency key is full: as many of the key's runs running as the
smallest limit among them and this run's (decision 0031); evaluated for keyed runs only."""
HELD_BY_OVERLAP = f"CASE WHEN r.overlap <> 'queue' THEN 0 ELSE {JOB_IS_BUSY.format(run='r')} END"
"""1 for a due run of an ``overlap: queue`` job while that job is busy: a run of it is
running, or a pipeline run another of its runs started is unfinished (decision 0044)."""

# Every due run, and apart those a limit holds back (decision 0042): they are not the
# pool's oldest due run. The flags cost a probe only for keyed and queued runs.
_DUE = f"""
SELECT pool, count(*) AS due,
       min(CASE WHEN held_key OR held_overlap THEN NULL ELSE available_at END) AS oldest_due_at,
       sum(held_key) AS held_by_key,
       sum(held_overlap AND NOT held_key) AS held_by_overlap
FROM (
    SELECT r.pool AS pool, r.available_at AS available_at,
           {HELD_BY_KEY} AS held_key, {HELD_BY_OVERLAP} AS held_overlap
    FROM runs r
    WHERE r.state = 'pending' AND r.available_at <= :now
      AND (:tenant IS NULL OR r.tenant_id = :tenant)
) GROUP BY pool
"""

# Times are integer microseconds here: bucket k holds (since + k*width, since + (k+1)*width].
_HISTORY = f"""
SELECT r.pool AS pool, (a.finished_at - :since - 1) / :width AS bucket,
       count(*) AS finished, sum(a.outcome IN ({_FAILED})) AS failures
FROM attempts a JOIN runs r ON r.id = a.run_id
WHERE a.finished_at > :since AND a.finished_at <= :now
  AND (:tenant IS NULL OR a.tenant_id = :tenant)
GROUP BY r.pool, bucket
"""


def pool_status(
    c: sqlite3.Connection, tenant_id: str | None, now: datetime, since: datetime
) -> list[PoolStatus]:
    params = {"tenant": tenant_id, "now": rows.us(now), "since": rows.us(since)}

    def fetch(sql: str) -> list[dict[str, Any]]:
        return [dict(r) for r in c.execute(sql, params)]

    due = fetch(_DUE)
    for row in due:
        row["oldest_due_at"] = rows.dt_or_none(row["oldest_due_at"])
    running = fetch(
        f"SELECT pool, count(*) AS running FROM runs WHERE state = 'running' AND {_TENANT}"
        " GROUP BY pool"
    )
    dead = fetch(
        f"SELECT pool, count(*) AS dead FROM runs WHERE state = 'dead' AND {_TENANT} GROUP BY pool"
    )
    return status.merge(due, running, dead, fetch(_RECENT))


def attempt_history(
    c: sqlite3.Connection, tenant_id: str | None, since: datetime, now: datetime, seconds: int
) -> list[AttemptBucket]:
    width = status.bucket_micros(since, now, seconds)
    params = {"tenant": tenant_id, "now": rows.us(now), "since": rows.us(since), "width": width}
    return status.buckets(dict(r) for r in c.execute(_HISTORY, params))


def count_jobs_by_state(c: sqlite3.Connection, tenant_id: str) -> dict[JobState, int]:
    found = c.execute(
        "SELECT state, count(*) FROM jobs WHERE tenant_id = ? GROUP BY state", (tenant_id,)
    )
    return {JobState(state): n for state, n in found}


def live_workers(c: sqlite3.Connection, seen_since: datetime) -> list[WorkerInfo]:
    found = c.execute(
        "SELECT * FROM workers WHERE last_seen_at >= ? ORDER BY id", (rows.us(seen_since),)
    )
    return [rows.worker(r) for r in found]


def runs_around(
    c: sqlite3.Connection, tenant_id: str, job_id: str, instant: datetime
) -> tuple[Run | None, Run | None]:
    at = rows.us(instant)
    before = c.execute(
        "SELECT * FROM runs WHERE tenant_id = ? AND job_id = ? AND scheduled_for <= ?"
        " ORDER BY scheduled_for DESC LIMIT 1",
        (tenant_id, job_id, at),
    ).fetchone()
    after = c.execute(
        "SELECT * FROM runs WHERE tenant_id = ? AND job_id = ? AND scheduled_for > ?"
        " ORDER BY scheduled_for LIMIT 1",
        (tenant_id, job_id, at),
    ).fetchone()
    return (
        None if before is None else rows.run(before),
        None if after is None else rows.run(after),
    )
