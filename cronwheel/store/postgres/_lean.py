"""The lean claim: what a pool pays when its runs use none of the claim's policies.

``CLAIM_RUNS`` (``_sql.py``) applies fairness across tenants, tenant caps, concurrency
keys and overlap policies in one statement of some twenty CTEs, and every pool paid for
all of them. Most pools use none: one tenant's runs, no keys, no cap, no policy. For
them this claim is the plain queue's: each pool's slice of ``runs_fair`` read in order
under ``FOR UPDATE SKIP LOCKED``, the few runs aged past their priority beside it, one
sort, one UPDATE (decision 0047).

Whether a claim may be lean is decided inside the claim statement, by ``GUARD`` over the
statement's own snapshot, never by the caller from an earlier read: a keyed run, a
second tenant or a policy run that is visible to the claim is visible to its guard, and
the claim then takes nothing and says so (the caller runs ``CLAIM_RUNS``). Under that
the lean claim reads only runs whose own row has no key and no policy (``concurrency_key
IS NULL AND overlap = 'allow'``), which ``FOR UPDATE`` checks again on the newest
version of a row changed since the snapshot: whatever a race brings, the lean claim
never starts a keyed or policed run, so no key's limit or job's policy can be broken by
it. A tenant's cap is read from the same snapshot as ``CLAIM_RUNS`` reads it.
"""

from __future__ import annotations

# Whether a run under an overlap policy is pending in {pools} (of tenant {tenant}, when not
# NULL) and due by {now}: one probe of runs_overlap.
DUE_POLICY = """EXISTS (
               SELECT 1 FROM runs
               WHERE state = 'pending' AND overlap <> 'allow' AND pool = ANY({pools}::text[])
                 AND available_at <= {now} AND ({tenant}::text IS NULL OR tenant_id = {tenant})
           )"""

# Whether the runs of {pools} (of tenant {tenant} only, when not NULL) leave the claim
# nothing to do but take the one tenant's runs in priority order: no run with a
# concurrency key pending (due or not: CLAIM_RUNS counts their tenant in the shares and
# locks their key), at most one tenant with runs pending, that tenant uncapped, and no
# run under an overlap policy due by {now}. Two probes of runs_fair a pool (its first and
# its last tenant), one of runs_keyed, one of runs_overlap and one of tenants: the same
# handful of index probes at any depth of queue. CLAIM_RUNS answers the same question
# from its own CTEs (its ``lean`` column), so that the next claim of the same pools knows
# which statement to send.
GUARD = (
    """
tenancy AS (
    SELECT (
        SELECT tenant_id FROM runs
        WHERE state = 'pending' AND concurrency_key IS NULL AND pool = p.pool
          AND ({tenant}::text IS NULL OR tenant_id = {tenant})
        ORDER BY tenant_id LIMIT 1
    ) AS lo, (
        SELECT tenant_id FROM runs
        WHERE state = 'pending' AND concurrency_key IS NULL AND pool = p.pool
          AND ({tenant}::text IS NULL OR tenant_id = {tenant})
        ORDER BY tenant_id DESC LIMIT 1
    ) AS hi
    FROM unnest({pools}::text[]) AS p(pool)
),
guard AS (
    SELECT t.lo AS tenant_id,
           t.lo IS NOT DISTINCT FROM t.hi
           AND NOT EXISTS (
               SELECT 1 FROM runs
               WHERE state = 'pending' AND concurrency_key IS NOT NULL
                 AND pool = ANY({pools}::text[])
                 AND ({tenant}::text IS NULL OR tenant_id = {tenant})
           )
           AND NOT """
    + DUE_POLICY
    + """
           AND NOT EXISTS (
               SELECT 1 FROM tenants WHERE id = t.lo AND max_running IS NOT NULL
           ) AS lean
    FROM (SELECT min(lo) AS lo, max(hi) AS hi FROM tenancy) AS t
)"""
)

# The columns a claimed run is returned with: the run's, and its job's own, prefixed
# ``job_`` (see _rows.claimed). A pipeline task's own policies stand in for its job's in
# lifecycle.claimed_run; the payload is chosen here so that a run with its own is not
# sent its job's.
JOB_COLUMNS = """j.name AS job_name, j.action::text AS job_action,
           CASE WHEN c.payload IS NULL THEN j.payload END AS job_payload,
           j.retry::text AS job_retry, j.timeout_seconds AS job_timeout_seconds,
           j.delivery AS job_delivery, j.traceparent AS job_traceparent"""

# Params: $1 worker, $2 pools (distinct), $3 prefetch_until, $4 limit, $5 now, $6 lease
# seconds, $7 the tenant (NULL: any), $8 the priority aging period in seconds, $9 whether
# the claimer starts the runs at once (see Store.claim_runs).
#
# With the guard's one tenant, CLAIM_RUNS's shares are the whole batch in every pool,
# its top-up and caps take nothing, and its turns follow the tenant's order: this is its
# result, run for run and in the same order (tests/store/test_lean_claims.py holds the
# two to it). Candidates: each pool's first $4 runs in priority then due order, and per
# lower priority its first $4 runs waiting longer than the aging period (usually none);
# taken by effective priority (one level higher per period waited), due time, id.
#
# One row always comes back: with ``lean`` false (the guard refused: nothing claimed,
# nothing locked), or with NULL run columns when there was nothing to claim.
CLAIM_RUNS_LEAN = f"""
WITH {GUARD.format(pools="$2", tenant="$7", now="$5")},
candidate AS (
    SELECT c.* FROM guard AS g
    CROSS JOIN unnest($2::text[]) AS p(pool)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM runs
        WHERE state = 'pending' AND pool = p.pool AND tenant_id = g.tenant_id
          AND available_at <= $3 AND overlap = 'allow' AND attempt < max_attempts
          AND concurrency_key IS NULL
        ORDER BY priority, available_at
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE g.lean
    UNION
    SELECT c.* FROM guard AS g
    CROSS JOIN unnest($2::text[]) AS p(pool)
    CROSS JOIN generate_series(1, 3) AS q(priority)
    CROSS JOIN LATERAL (
        SELECT id, priority, available_at FROM runs
        WHERE state = 'pending' AND pool = p.pool AND tenant_id = g.tenant_id
          AND priority = q.priority
          AND available_at <= least($3, $5 - make_interval(secs => $8::float8))
          AND overlap = 'allow' AND attempt < max_attempts AND concurrency_key IS NULL
        ORDER BY available_at
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE g.lean
),
picked AS (
    SELECT id, row_number() OVER (ORDER BY effective, available_at, id) AS turn
    FROM (
        SELECT id, available_at, greatest(0, priority - greatest(0, floor(
                   extract(epoch FROM $5::timestamptz - available_at)::float8 / $8::float8
               )))::int AS effective
        FROM candidate
        ORDER BY effective, available_at, id
        LIMIT $4
    ) AS c
),
claimed AS (
    UPDATE runs AS r
    SET state = 'running', fence = r.fence + 1, attempt = r.attempt + 1, lease_owner = $1,
        lease_expires_at = greatest(r.available_at, $5) + make_interval(secs => $6),
        started_at = CASE WHEN $9::bool THEN greatest(r.available_at, $5) END,
        cancel_requested = false
    -- An array of ids: a primary-key probe each, whatever the estimates above.
    WHERE r.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING r.*
)
SELECT x.*, 0::bigint AS overlap_skipped, g.lean
FROM guard AS g
LEFT JOIN (
    SELECT c.*, {JOB_COLUMNS}, p.turn
    FROM claimed AS c
    JOIN picked AS p ON p.id = c.id
    -- A primary-key probe per claimed run, as CLAIM_RUNS does (OFFSET 0 keeps it one):
    -- linear whatever the plan. One probe per distinct job, joined back to the runs,
    -- was nested by the generic plan (its runs estimated at 10) into a rescan of every
    -- claimed run per job: quadratic in a claim of runs of many jobs (one-time jobs, a
    -- herd of cron jobs), 470 ms for 2,500 runs of 2,500 jobs.
    CROSS JOIN LATERAL (SELECT * FROM jobs WHERE id = c.job_id OFFSET 0) AS j
) AS x ON true
ORDER BY x.turn"""
