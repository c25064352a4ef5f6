"""The reads of ``cronwheel status`` on PostgreSQL: each one through an index (see
migration 0006), never a scan of the runs or attempts table.

Params: ``$1`` is the tenant, or NULL for every tenant.
"""

from __future__ import annotations

from cronwheel.store.base import FAILED_OUTCOMES
from cronwheel.store.postgres._sql import JOB_IS_BUSY

_TENANT = "($1::text IS NULL OR tenant_id = $1)"

# Params: $2 now. Through runs_fair (pending runs without a key by pool, tenant and due
# time: 0016, 0019) and runs_keyed (those with one: 0019): every pending run is in exactly
# one of them. Apart: the due runs a limit holds back (decision 0042), which are not the
# pool's oldest due run. The flags cost a probe only for keyed and queued runs: a keyed
# run's key counted through runs_keyed_running, a queued run's job through its runs.
HELD_BY_KEY = """CASE WHEN r.concurrency_key IS NULL THEN false ELSE (
        SELECT count(*) >= least(coalesce(r.concurrency_limit, 1),
                                 coalesce(min(k.concurrency_limit), r.concurrency_limit, 1))
        FROM runs k
        WHERE k.tenant_id = r.tenant_id AND k.concurrency_key = r.concurrency_key
          AND k.state = 'running' AND k.concurrency_key IS NOT NULL) END"""
HELD_BY_OVERLAP = (
    f"""CASE WHEN r.overlap <> 'queue' THEN false ELSE {JOB_IS_BUSY.format(run="r")} END"""
)
_DUE_OF = f"""
    SELECT r.pool, r.available_at, {HELD_BY_KEY} AS held_key, {HELD_BY_OVERLAP} AS held_overlap
    FROM runs r WHERE r.state = 'pending' AND r.concurrency_key IS {{keyed}}
      AND r.available_at <= $2 AND ($1::text IS NULL OR r.tenant_id = $1)"""
DUE = f"""
SELECT pool, count(*) AS due,
       min(available_at) FILTER (WHERE NOT held_key AND NOT held_overlap) AS oldest_due_at,
       count(*) FILTER (WHERE held_key) AS held_by_key,
       count(*) FILTER (WHERE held_overlap AND NOT held_key) AS held_by_overlap
FROM (
{_DUE_OF.format(keyed="NULL")}
    UNION ALL
{_DUE_OF.format(keyed="NOT NULL")}
) AS d
GROUP BY pool
"""

# Through runs_leases (running runs only).
RUNNING = f"""
SELECT pool, count(*) AS running FROM runs
WHERE state = 'running' AND {_TENANT}
GROUP BY pool
"""

# Through runs_dead (dead runs only).
DEAD = (
    f"SELECT pool, count(*) AS dead FROM all_runs WHERE state = 'dead' AND {_TENANT} GROUP BY pool"
)

_FAILED = ", ".join(f"'{outcome}'" for outcome in FAILED_OUTCOMES)

# Params: $2 now, $3 since. Through attempts_finished, each attempt's run by its key.
# percentile_disc is the nearest rank (the SQLite store computes the same one).
RECENT = f"""
SELECT r.pool AS pool,
       count(*) AS finished,
       count(*) FILTER (WHERE a.outcome IN ({_FAILED})) AS failures,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY a.lag_seconds) AS lag_p50,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY a.lag_seconds) AS lag_p99
FROM all_attempts a JOIN all_runs r ON r.id = a.run_id
WHERE a.finished_at > $3 AND a.finished_at <= $2 AND ($1::text IS NULL OR a.tenant_id = $1)
GROUP BY r.pool
"""

# Params: $2 now, $3 since, $4 bucket width in microseconds. Through attempts_finished,
# each attempt's run by its key. Bucket k holds (since + k*width, since + (k+1)*width].
HISTORY = f"""
SELECT r.pool AS pool,
       floor((extract(epoch FROM a.finished_at - $3) * 1000000 - 1) / $4)::bigint AS bucket,
       count(*) AS finished,
       count(*) FILTER (WHERE a.outcome IN ({_FAILED})) AS failures
FROM all_attempts a JOIN all_runs r ON r.id = a.run_id
WHERE a.finished_at > $3 AND a.finished_at <= $2 AND ($1::text IS NULL OR a.tenant_id = $1)
GROUP BY 1, 2
"""

# Through jobs_tenant_id: the tenant's jobs only.
JOBS_BY_STATE = "SELECT state, count(*) AS n FROM jobs WHERE tenant_id = $1 GROUP BY state"

LIVE_WORKERS = "SELECT * FROM workers WHERE last_seen_at >= $1 ORDER BY id"

# Params: $1 tenant, $2 job, $3 instant. Through runs_job_scheduled_for.
RUN_AT_OR_BEFORE = """
SELECT * FROM all_runs WHERE tenant_id = $1 AND job_id = $2 AND scheduled_for <= $3
ORDER BY scheduled_for DESC LIMIT 1
"""
RUN_AFTER = """
SELECT * FROM all_runs WHERE tenant_id = $1 AND job_id = $2 AND scheduled_for > $3
ORDER BY scheduled_for LIMIT 1
"""

# The standbys streaming from this server (their sync_state needs pg_read_all_stats or a
# superuser; without it, NULL: counted as streaming, not as synchronous) and the settings
# that make a commit wait for them.
REPLICATION = """
SELECT current_setting('synchronous_standby_names') AS names,
       current_setting('synchronous_commit') AS commit,
       ARRAY(SELECT sync_state FROM pg_stat_replication
             WHERE state IS DISTINCT FROM 'backup' ORDER BY 1) AS states
"""
