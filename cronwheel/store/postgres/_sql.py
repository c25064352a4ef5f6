"""The PostgreSQL store's statements.

Hot-path statements take whole batches as parallel arrays (``unnest``) and do every step
of a verb in one statement with data-modifying CTEs: one round trip, one implicit
transaction, and ``pg_notify`` delivered at its commit. JSON values travel as ``text[]``
cast to ``jsonb`` because asyncpg would read a JSON list inside an array parameter as an
extra array dimension.
"""

from __future__ import annotations

from typing import Any

from cronwheel.core.lifecycle import UNSTARTED_LOST_NOTE
from cronwheel.core.model import MAX_NOTIFY_ERROR
from cronwheel.store.postgres._lean import DUE_POLICY, JOB_COLUMNS

FINISHED_STATES = "('succeeded', 'dead', 'cancelled', 'skipped')"

MIGRATION_LOCK = 0x63726F6E776865  # "cronwhe": the advisory lock key of migrate()

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now()
)"""

RECORD_MIGRATIONS = (
    "INSERT INTO schema_migrations (version) SELECT unnest($1::int[]) ON CONFLICT DO NOTHING"
)

HAS_MIGRATIONS_TABLE = "SELECT to_regclass('schema_migrations') IS NOT NULL"

SCHEMA_VERSION = "SELECT coalesce(max(version), 0) FROM schema_migrations"

ENSURE_TENANT = (
    "INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
)

CREATE_TENANT = (
    "INSERT INTO tenants (id, name, max_jobs, max_creates_per_second, created_at,"
    " claim_weight, max_running) VALUES ($1, $2, $3, $4, $5, $6, $7)"
)

GET_TENANT = "SELECT * FROM tenants WHERE id = $1"

LIST_TENANTS = "SELECT * FROM tenants ORDER BY id"

# created_at is the tenant's birth, not part of its definition: never rewritten.
UPDATE_TENANT = (
    "UPDATE tenants SET name = $2, max_jobs = $3, max_creates_per_second = $4,"
    " claim_weight = $5, max_running = $6 WHERE id = $1 RETURNING *"
)

# LIMIT NULL: no limit.
COUNT_LIVE_JOBS = (
    "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE tenant_id = $1"
    " AND state NOT IN ('cancelled', 'completed') LIMIT $2) AS live"
)

# A tenant with max_jobs, its row locked until the create's transaction ends: concurrent
# creates of the tenant, in any process, count its live jobs one after the other (the
# count is a separate statement, so it sees what the one before committed). A tenant
# without the limit is not locked. NO KEY: API keys' foreign key is not blocked.
LOCK_MAX_JOBS = (
    "SELECT max_jobs FROM tenants WHERE id = $1 AND max_jobs IS NOT NULL FOR NO KEY UPDATE"
)

# The create bucket's content at $3 (decision 0027): what it held, refilled at the
# tenant's rate since its time (never backwards), capped at one second's worth
# (cronwheel.store.base.bucket_capacity); NULL, a bucket never used: full.
_BUCKET = (
    "LEAST(GREATEST(max_creates_per_second, 1.0), COALESCE(create_tokens"
    " + max_creates_per_second * GREATEST(EXTRACT(EPOCH FROM $3::timestamptz"
    " - create_tokens_at)::float8, 0.0), GREATEST(max_creates_per_second, 1.0)))"
)

# Take $2 tokens if the bucket holds min($2, capacity), in one statement. The UPDATE's
# condition and values are evaluated on the row as it is when the UPDATE gets it (after
# waiting for a concurrent taker, PostgreSQL re-reads the row and re-checks), so two
# processes never spend the same tokens. The outer SELECT reads the statement's snapshot:
# only the Retry-After of a refusal comes from it, and a stale figure there costs a
# second at most.
TAKE_CREATE_TOKENS = f"""
WITH taken AS (
    UPDATE tenants
    SET create_tokens = {_BUCKET} - $2::int,
        create_tokens_at = GREATEST(create_tokens_at, $3::timestamptz)
    WHERE id = $1 AND max_creates_per_second IS NOT NULL
      AND {_BUCKET} >= LEAST($2::int, GREATEST(max_creates_per_second, 1.0))
    RETURNING id
)
SELECT max_creates_per_second AS rate, {_BUCKET} AS tokens,
       EXISTS (SELECT FROM taken) AS granted
FROM tenants WHERE id = $1
"""

# -- API keys ------------------------------------------------------------------------

CREATE_API_KEY = (
    "INSERT INTO api_keys (id, tenant_id, key_hash, role, name, created_at, revoked_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7)"
)

FIND_API_KEY = "SELECT * FROM api_keys WHERE key_hash = $1"

LIST_API_KEYS = "SELECT * FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id"

# Params: $1 tenant, $2 key id, $3 now. coalesce: revoking again keeps the first instant.
REVOKE_API_KEY = (
    "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $3)"
    " WHERE tenant_id = $1 AND id = $2 RETURNING *"
)

# -- API idempotency -------------------------------------------------------------------

# Params: $1 tenant, $2 key, $3 request hash, $4 status, $5 body, $6 created_at. asyncpg
# sends a None body as SQL NULL; the column keeps it as the JSON null it stands for.
# Returns no row when a response is kept already: read it with GET_RESPONSE, in a
# statement of its own, whose fresh snapshot sees a racing insert that this one waited
# for (one statement's snapshot would not).
SAVE_RESPONSE = """
INSERT INTO idempotency_keys (tenant_id, key, request_hash, status, response, created_at)
VALUES ($1, $2, $3, $4, coalesce($5::jsonb, 'null'::jsonb), $6)
ON CONFLICT (tenant_id, key) DO NOTHING
RETURNING *"""

GET_RESPONSE = "SELECT * FROM idempotency_keys WHERE tenant_id = $1 AND key = $2"

DELETE_RESPONSES = "DELETE FROM idempotency_keys WHERE created_at < $1"

# -- worker registry -------------------------------------------------------------------

# Params: $1 id, $2 tenant, $3 host, $4 pools (a JSON list), $5 capacity, $6 in flight,
# $7 started_at, $8 last_seen_at, $9 brokers (a JSON object), $10 commands (a JSON list).
# started_at is left out of the update: a heartbeat refreshes the record, and the first
# registration is when the worker started.
REGISTER_WORKER = """
INSERT INTO workers (id, tenant_id, host, pools, capacity, in_flight, started_at, last_seen_at,
    brokers, commands)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO UPDATE
SET tenant_id = excluded.tenant_id, host = excluded.host, pools = excluded.pools,
    capacity = excluded.capacity, in_flight = excluded.in_flight,
    last_seen_at = excluded.last_seen_at, brokers = excluded.brokers,
    commands = excluded.commands"""

LIST_WORKERS = "SELECT * FROM workers WHERE tenant_id = $1 AND last_seen_at >= $2 ORDER BY id"

REMOVE_WORKER = "DELETE FROM workers WHERE id = $1"

# Params: $1 tenant, $2 seen since. A remote worker's id is "<tenant>/<id>" and it claims
# for its tenant only; any other worker claims for every tenant.
SERVED_POOLS = """
SELECT DISTINCT p.pool
FROM workers AS w CROSS JOIN LATERAL jsonb_array_elements_text(w.pools) AS p(pool)
WHERE w.last_seen_at >= $2 AND (w.tenant_id = $1 OR NOT starts_with(w.id, w.tenant_id || '/'))"""

# -- jobs ----------------------------------------------------------------------------

# {keys} and {limits}: the parameters of the runs' concurrency keys and limits (0019).
_NEW_RUNS = """
    SELECT * FROM unnest($1::uuid[], $2::text[], $3::timestamptz[], $4::timestamptz[],
                         $5::text[], $6::text[], $7::int[], $8::int[], $9::int[], $10::text[],
                         $11::text[], {keys}::text[], {limits}::int[])
        AS r(job_id, tenant_id, scheduled_for, available_at, state, pool, priority,
             max_attempts, job_version, reason, overlap, concurrency_key, concurrency_limit)"""

_INSERT_RUNS = f"""
    INSERT INTO runs (tenant_id, job_id, scheduled_for, available_at, state, pool, priority,
                      max_attempts, job_version, reason, overlap, created_at, finished_at,
                      concurrency_key, concurrency_limit)
    SELECT r.tenant_id, r.job_id, r.scheduled_for, r.available_at, r.state, r.pool,
           r.priority, r.max_attempts, r.job_version, r.reason, r.overlap, {{now}},
           CASE WHEN r.state IN {FINISHED_STATES} THEN {{now}} END,
           r.concurrency_key, r.concurrency_limit
    FROM candidate AS r"""

# A channel is a topic, or the md5 of a topic longer than PostgreSQL's 63-byte identifier
# limit (pg_notify refuses a longer name; LISTEN would truncate it). Mirrors
# ``_listen.channel``.
_CHANNEL = "CASE WHEN octet_length({t}) <= 63 THEN {t} ELSE 'cw:' || md5({t}) END"


# Completion notifications: the outbox rows of the runs of ``source`` whose state change is
# an event (``event``, NULL: none) that one of their job's targets listens to, written
# by the statement that changes the state (docs/workflows.md#notifications). Only the
# batch's distinct jobs with events are looked up, one primary-key probe each (OFFSET 0
# keeps it one), and only those with targets (notify IS NOT NULL) go further: a batch
# whose jobs have none writes nothing and reads its runs once, for their job ids (the
# events of its runs are made only for the jobs found: decision 0047), and W1's batch
# of a thousand runs of one job costs one probe. ``error`` and ``at`` are SQL over the
# source's rows (aliased ``s``) or the caller's params. An event id is the run's, the
# event's and the attempt's: the same for every target and every delivery, so a
# receiver deduplicates on it.
#
# The jobs found are one row, a JSON object by job id that each run looks its job up in
# (a binary search of the keys), computed once (MATERIALIZED) before any run is read
# again: no join of the runs with their jobs is left for the planner to nest. Joined,
# a batch of runs of many jobs was quadratic whenever the plan nested the probe under
# the runs (a generic plan always did; a custom one when the runs' estimate was low):
# 1,000 runs of 1,000 one-time jobs probed jobs_pkey a million times (decision 0035's
# addendum, bench/README.md "Runs of many jobs").
_OUTBOX = """
noisy AS MATERIALIZED (
    SELECT jsonb_object_agg(j.id::text, jsonb_build_object('name', j.name, 'notify', j.notify))
        AS jobs
    FROM (SELECT DISTINCT s.job_id FROM {source} AS s WHERE {event} IS NOT NULL) AS b
    CROSS JOIN LATERAL (
        SELECT id, name, notify FROM jobs WHERE id = b.job_id AND notify IS NOT NULL OFFSET 0
    ) AS j
),
outbox AS (
    INSERT INTO notifications (tenant_id, event_id, event, job_id, job_name, run_id,
                               scheduled_for, attempt, error, occurred_at, target, url, next_at)
    SELECT s.tenant_id, 'run-' || s.id || '-' || e.event || '-' || s.attempt, e.event,
           s.job_id, n.job->>'name', s.id, s.scheduled_for, s.attempt, e.error, e.at, t.i - 1,
           t.target->>'url', e.at
    FROM {source} AS s
    CROSS JOIN LATERAL (SELECT (SELECT jobs FROM noisy) -> s.job_id::text AS job) AS n
    CROSS JOIN LATERAL (
        SELECT {event} AS event, left({error}, {max_error}) AS error, {at} AS at
    ) AS e
    CROSS JOIN LATERAL jsonb_array_elements(n.job->'notify') WITH ORDINALITY AS t(target, i)
    -- No job of the batch has a target (the usual case): one test, no run read again.
    WHERE (SELECT jobs FROM noisy) IS NOT NULL
      AND e.event IS NOT NULL AND t.target->'on' ? e.event
    ORDER BY s.id, t.i
),"""

# Which event a state a run was moved to is: by a completion or a rescue (a retry is a
# failed attempt), and by a planning statement (only a skipped run is one).
_OUTCOME_EVENT = (
    "CASE s.state WHEN 'succeeded' THEN 'succeeded' WHEN 'pending' THEN 'failed'"
    " WHEN 'dead' THEN 'dead' END"
)
_SKIPPED_EVENT = "CASE WHEN s.state = 'skipped' THEN 'skipped' END"


def _outbox(source: str, event: str, error: str, at: str) -> str:
    return _OUTBOX.format(
        source=source, event=event, error=error, at=at, max_error=MAX_NOTIFY_ERROR
    )


# The outbox of the planning statements' inserted runs (CTE ``inserted``).
_SKIPPED_OUTBOX = _outbox("inserted", _SKIPPED_EVENT, "s.reason", "s.created_at")


def _wake_pools(source: str, tenant: str = "''") -> str:
    """The CTE ``woken``: a notification per pool of ``source``'s pending runs. Its
    payload names the runs' tenant (``tenant``, SQL) where a statement's runs are one
    tenant's (an enqueue): a worker's peek then claims for that tenant alone
    (``Listener.take_tenants``, decision 0037). Empty: the runs may be anyone's."""
    channel = _CHANNEL.format(t="'runs:' || pool")
    return f"""
woken AS (
    SELECT pg_notify({channel}, {tenant})
    FROM (SELECT DISTINCT pool FROM {source} WHERE state = 'pending') AS p
)"""


# Params: $1-$12 the runs (see _rows.new_run_template_columns: $1-$10 one element per
# template, $11-$12 one per run); the jobs (see _rows.job_columns): $13-$17 one element
# per job, $18-$36 one per template, the columns the jobs share; $37 the actor, $38 the
# runs' created_at; $39 each job's traceparent; $40 each job's concurrency (JSON text);
# $41-$42 each run's concurrency key and limit. The templates are materialised CTEs so
# that their JSON is parsed once per template, not once per job. The ids come as text:
# the uuid codec is a Python call per element, text[] is encoded without one.
CREATE_JOBS = f"""
WITH run_template AS MATERIALIZED (
    SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::timestamptz[], $4::text[],
                         $5::text[], $6::int[], $7::int[], $8::int[], $9::text[], $10::text[])
        WITH ORDINALITY
        AS t(tenant_id, scheduled_for, available_at, state, pool, priority, max_attempts,
             job_version, reason, overlap, k)
),
candidate AS (
    SELECT t.tenant_id, r.job_id::uuid AS job_id, t.scheduled_for, t.available_at, t.state,
           t.pool, t.priority, t.max_attempts, t.job_version, t.reason, t.overlap,
           r.concurrency_key, r.concurrency_limit
    FROM unnest($11::text[], $12::int[], $41::text[], $42::int[])
        AS r(job_id, template, concurrency_key, concurrency_limit)
    JOIN run_template AS t ON t.k = r.template + 1
),
template AS MATERIALIZED (
    -- Each distinct tenant of the batch checked once (no foreign key: 0003).
    SELECT CASE WHEN EXISTS (SELECT 1 FROM tenants WHERE id = t.tenant_id) THEN k
                WHEN cronwheel_not_present('jobs_tenant_id_fkey', 'tenant_id', t.tenant_id,
                                           'tenants') THEN k END AS k,
           tenant_id, schedule::jsonb AS schedule, action::jsonb AS action, pool, priority,
           retry::jsonb AS retry, timeout_seconds, misfire::jsonb AS misfire, overlap,
           jitter_seconds, catchup_seconds, delivery, state, version, next_fire_at,
           last_fire_at, created_at, updated_at, notify::jsonb AS notify
    FROM unnest($18::text[], $19::text[], $20::text[], $21::text[], $22::int[], $23::text[],
                $24::float8[], $25::text[], $26::text[], $27::float8[], $28::float8[],
                $29::text[], $30::text[], $31::int[], $32::timestamptz[], $33::timestamptz[],
                $34::timestamptz[], $35::timestamptz[], $36::text[])
        WITH ORDINALITY
        AS t(tenant_id, schedule, action, pool, priority, retry, timeout_seconds, misfire,
             overlap, jitter_seconds, catchup_seconds, delivery, state, version, next_fire_at,
             last_fire_at, created_at, updated_at, notify, k)
),
new_jobs AS (
    INSERT INTO jobs (id, tenant_id, name, schedule, action, pool, payload, priority, retry,
                      timeout_seconds, misfire, overlap, jitter_seconds, catchup_seconds,
                      delivery, state, version, next_fire_at, last_fire_at, shard_key,
                      created_at, updated_at, traceparent, notify, concurrency)
    SELECT j.id::uuid, t.tenant_id, j.name, t.schedule, t.action, t.pool, j.payload::jsonb,
           t.priority, t.retry, t.timeout_seconds, t.misfire, t.overlap, t.jitter_seconds,
           t.catchup_seconds, t.delivery, t.state, t.version, t.next_fire_at, t.last_fire_at,
           j.shard_key, t.created_at, t.updated_at, j.traceparent, t.notify,
           j.concurrency::jsonb
    FROM unnest($13::text[], $14::text[], $15::text[], $16::int[], $17::int[], $39::text[],
                $40::text[])
        WITH ORDINALITY AS j(id, name, payload, shard_key, template, traceparent, concurrency, n)
    JOIN template AS t ON t.k = j.template + 1
    ORDER BY j.n
    RETURNING id, tenant_id, name, version, created_at
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)
    SELECT tenant_id, 'job', id::text, 'created', $37, created_at,
           jsonb_build_object('version', version, 'name', name)
    FROM new_jobs
),
inserted AS ({_INSERT_RUNS.format(now="coalesce($38::timestamptz, now())")}
    -- A run's job is one of this statement's jobs (a hashed SubPlan), or else must exist
    -- (no foreign key: 0003): a probe of jobs' primary key (OFFSET 0 keeps it one, not a
    -- hash of every job). CASE keeps that order.
    WHERE CASE WHEN r.job_id IN (SELECT id FROM new_jobs) THEN true
               WHEN EXISTS (SELECT 1 FROM jobs WHERE id = r.job_id OFFSET 0) THEN true
               ELSE cronwheel_not_present('runs_job_id_fkey', 'job_id', r.job_id::text, 'jobs')
          END
    ON CONFLICT (job_id, scheduled_for) DO NOTHING
    RETURNING pool, state
),{_wake_pools("inserted")}
SELECT (SELECT count(*) FROM new_jobs) AS jobs, (SELECT count(*) FROM woken) AS woken"""

# Whether the occurrence of the candidate run ``r`` was archived (decision 0032): the unique
# (job_id, scheduled_for) index covers runs only, so an insert-if-absent of past
# occurrences (a backfill, the skipped runs of a resume) also probes history, one
# descent of run_history_job_scheduled_for per partition.
_ARCHIVED = """EXISTS (
        SELECT 1 FROM run_history AS h
        WHERE h.job_id = r.job_id AND h.scheduled_for = r.scheduled_for)"""

# Params: $1-$11 the runs (see _NEW_RUNS), $12 their created_at, $13-$14 their
# concurrency keys and limits.
INSERT_RUNS = f"""
WITH candidate AS ({_NEW_RUNS.format(keys="$13", limits="$14")}
),
inserted AS ({_INSERT_RUNS.format(now="$12::timestamptz")}
    WHERE NOT {_ARCHIVED}
    ON CONFLICT (job_id, scheduled_for) DO NOTHING
    RETURNING id, tenant_id, job_id, scheduled_for, attempt, pool, state, reason, created_at
),{_SKIPPED_OUTBOX}{_wake_pools("inserted")}
SELECT (SELECT count(*) FROM inserted) AS inserted, (SELECT count(*) FROM woken) AS woken"""

# Params: $1 tenant, $2 job id, $3 the earliest scheduled_for, $4 available_at and
# created_at, $5 pool, $6 priority, $7 max_attempts, $8 job_version, $9 reason, $10 overlap,
# $11 the payloads (JSON text, NULL for the job's), $12 their concurrency keys, $13 the
# limit. The job is locked (LOCK_JOB) in the same
# transaction: the latest run is read under that lock, so concurrent enqueues never pick
# the same instant. max() is one descent of runs_job_scheduled_for.
ENQUEUE_RUNS = f"""
WITH floor AS (
    SELECT greatest($3::timestamptz, (SELECT max(scheduled_for) FROM runs WHERE job_id = $2)
                                     + interval '1 microsecond') AS t
),
inserted AS (
    INSERT INTO runs (tenant_id, job_id, scheduled_for, available_at, state, pool, priority,
                      max_attempts, job_version, reason, overlap, created_at, payload,
                      concurrency_key, concurrency_limit)
    SELECT $1, $2, f.t + (p.n - 1) * interval '1 microsecond', $4, 'pending', $5, $6, $7, $8,
           $9, $10, $4, p.payload::jsonb, p.concurrency_key, $13::int
    FROM floor AS f,
         unnest($11::text[], $12::text[]) WITH ORDINALITY AS p(payload, concurrency_key, n)
    ORDER BY p.n
    RETURNING id, scheduled_for, pool, state
),{_wake_pools("inserted", tenant="$1::text")}
SELECT array_agg(id ORDER BY scheduled_for) AS ids, (SELECT count(*) FROM woken) AS woken
FROM inserted"""

GET_JOB = "SELECT * FROM jobs WHERE tenant_id = $1 AND id = $2"

# Params: $1 tenant, $2 concurrency key. Through runs_keyed_running.
KEY_RUNNING = """
SELECT count(*), min(concurrency_limit) FROM runs
WHERE tenant_id = $1 AND concurrency_key = $2 AND state = 'running'"""

# Params: $1 tenant, $2 job ids. One probe of runs_job_finished per job.
LAST_RUNS = """
SELECT r.job_id, r.id, r.state, r.scheduled_for, r.finished_at, r.attempt, r.reason,
       r.last_error
FROM unnest($2::uuid[]) AS j(id)
CROSS JOIN LATERAL (
    SELECT * FROM all_runs
    WHERE job_id = j.id AND finished_at IS NOT NULL
    ORDER BY finished_at DESC, id DESC
    LIMIT 1
) AS r
WHERE r.tenant_id = $1"""

# A job's last outcome as a condition of a job listing: the same one probe of
# runs_job_finished per job examined as LAST_RUNS, never a scan of the runs.
LAST_OUTCOME_IS = (
    "(SELECT r.state FROM all_runs AS r WHERE r.job_id = jobs.id AND r.finished_at IS NOT NULL"
    " ORDER BY r.finished_at DESC, r.id DESC LIMIT 1) = {}"
)
NO_FINISHED_RUN = (
    "NOT EXISTS (SELECT 1 FROM all_runs AS r WHERE r.job_id = jobs.id"
    " AND r.finished_at IS NOT NULL)"
)

JOB_ORDER: dict[str, tuple[str | None, str | None]] = {
    "created": (None, None),
    "name": ('name COLLATE "C"', "{}"),
    "next_fire": (
        "coalesce(CASE WHEN state = 'active' THEN next_fire_at END, 'infinity'::timestamptz)",
        "coalesce({}::timestamptz, 'infinity'::timestamptz)",
    ),
}
"""What each :class:`~cronwheel.core.model.JobOrder` sorts by before the id, written as the
indexes of migration 0009 have it (the planner matches the expression and collation),
and the cursor's bound for it: a name in byte (= code point) order, as SQLite's
BINARY collation has it; a job that will not fire (not active, or without a next fire
time) after every instant."""

LOCK_JOB = "SELECT version, state FROM jobs WHERE tenant_id = $1 AND id = $2 FOR UPDATE"


# Params: $1 id, $2-$18 the definition, $19 the new version, $20 the actor, $21 replan,
# $22 the replanned runs' reason, $23 the notification targets (NULL: none), $24 the
# concurrency key and limit (NULL: none). Runs already made keep their keys.
UPDATE_JOB = """
WITH job AS (
    UPDATE jobs
    SET name = $2, schedule = $3, action = $4, pool = $5, payload = $6, priority = $7,
        retry = $8, timeout_seconds = $9, misfire = $10, overlap = $11, jitter_seconds = $12,
        catchup_seconds = $13, delivery = $14, state = $15, next_fire_at = $16,
        last_fire_at = $17, updated_at = $18, version = $19, notify = $23::jsonb,
        concurrency = $24::jsonb
    WHERE id = $1
    RETURNING *
),
replanned AS (
    -- Occurrences planned from the old schedule that never started; a retry of one that
    -- did start (attempt > 0) is kept.
    UPDATE runs
    SET state = 'cancelled', finished_at = $18, reason = $22
    WHERE $21 AND job_id = $1 AND state = 'pending' AND attempt = 0 AND job_version < $19
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)
    SELECT tenant_id, 'job', id::text, 'updated', $20, updated_at,
           jsonb_build_object('version', version)
    FROM job
)
SELECT * FROM job"""

# Params: $1 id, $2 new state, $3 next_fire_at, $4 now, $5 audit action, $6 actor,
# $7 audit details.
SET_JOB_STATE = """
WITH job AS (
    UPDATE jobs
    SET state = $2, next_fire_at = $3, version = version + 1, updated_at = $4
    WHERE id = $1
    RETURNING *
),
cancelled_runs AS (
    UPDATE runs SET state = 'cancelled', finished_at = $4, reason = 'job cancelled'
    WHERE job_id = $1 AND state = 'pending' AND $2 = 'cancelled'
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)
    SELECT tenant_id, 'job', id::text, $5, $6, $4, $7 FROM job
)
SELECT * FROM job"""

# -- scheduler -----------------------------------------------------------------------

# Params: $1-$11 the runs (see _NEW_RUNS), $12-$18 the targets: every job of the batch
# once, in ascending id order, with its advance if it has one (see _rows.target_columns),
# $19-$20 the runs' concurrency keys and limits.
MATERIALIZE_RUNS = f"""
WITH candidate AS ({_NEW_RUNS.format(keys="$19", limits="$20")}
),
locked AS (
    -- The batch's jobs that are still active, each locked (in id order) before anything
    -- is written, and the runs inserted in key order: schedulers racing over the same
    -- jobs (a shard changing hands) queue behind one another instead of deadlocking. The
    -- lock also orders this insert with a concurrent pause or cancel: either the cancel
    -- waits and then cancels these runs too, or it wins and nothing goes in.
    SELECT t.* FROM unnest($12::uuid[], $13::bool[], $14::int[], $15::timestamptz[],
                           $16::timestamptz[], $17::timestamptz[], $18::text[])
        AS t(job_id, has_advance, version, expected_next_fire_at, next_fire_at,
             last_fire_at, state)
    CROSS JOIN LATERAL (
        SELECT state FROM jobs WHERE id = t.job_id OFFSET 0 FOR NO KEY UPDATE
    ) AS j
    WHERE j.state = 'active'
),
advanced AS (
    -- A compare-and-set on the fire time as well as the version: advancing a job does not
    -- change its version, so only this refuses a scheduler that read the job before
    -- another advanced it (the unique index on runs no longer sees an occurrence once it
    -- is archived, decision 0032). The row was locked above: a racing advance has
    -- committed by now, and the latest version of the row is the one compared.
    UPDATE jobs AS j
    SET next_fire_at = l.next_fire_at, last_fire_at = coalesce(l.last_fire_at, j.last_fire_at),
        state = l.state
    FROM locked AS l
    WHERE j.id = l.job_id AND l.has_advance AND j.version = l.version
      AND j.next_fire_at IS NOT DISTINCT FROM l.expected_next_fire_at
    RETURNING j.id
),
inserted AS ({_INSERT_RUNS.format(now="now()")}
    -- Under an OR both lists stay hashed SubPlans, built once whatever the estimates.
    -- A job that advances gets occurrences from the next_fire_at it still had, never
    -- archived ones (decision 0032); the others (a backfill) are past occurrences, which
    -- history may already hold.
    WHERE r.job_id IN (SELECT id FROM advanced)
       OR (r.job_id IN (SELECT job_id FROM locked WHERE NOT has_advance) AND NOT {_ARCHIVED})
    ORDER BY r.job_id, r.scheduled_for
    ON CONFLICT (job_id, scheduled_for) DO NOTHING
    RETURNING id, tenant_id, job_id, scheduled_for, attempt, pool, state, reason, created_at
),{_SKIPPED_OUTBOX}{_wake_pools("inserted")}
SELECT (SELECT count(*) FROM inserted) AS inserted,
       array(SELECT id FROM advanced) AS advanced,
       (SELECT count(*) FROM woken) AS woken"""

# -- workers -------------------------------------------------------------------------


# Whether the job of the row aliased ``{run}`` is busy (cronwheel.core.overlap.busy): it
# has a running run, or a pipeline run started by another of its runs is unfinished
# (decision 0044). A probe of runs_running_by_job, then of pipeline_runs_running_by_job,
# per row (OFFSET 0 keeps each a correlated lookup; turned into a join, stale statistics
# can make it a scan of every running run per row).
JOB_IS_BUSY = """(EXISTS (
    SELECT 1 FROM runs AS o WHERE o.job_id = {run}.job_id AND o.state = 'running' OFFSET 0
) OR EXISTS (
    SELECT 1 FROM pipeline_runs AS pr
    WHERE pr.job_id = {run}.job_id AND pr.state = 'running'
      AND pr.trigger_run_id IS DISTINCT FROM {run}.id OFFSET 0
))"""

# Params: $1 worker, $2 pools, $3 prefetch_until, $4 limit, $5 now, $6 lease seconds,
# $7 the reason of runs skipped by their overlap policy, $8 the tenant (NULL: any), $9 the
# priority aging period in seconds.
#
# A run whose attempts have reached its budget (attempt >= max_attempts) is never
# claimed, whatever left it pending: no claim starts an attempt the run does not have.
#
# Fair across tenants (decision 0028): the tenants with pending runs in each pool are
# found by a loose index scan of runs_fair (one probe per tenant), and each gets a share
# of the batch in proportion to its claim_weight. A tenant's share is read from its own
# slice of runs_fair in priority then due order, stopping after the share, plus, per
# lower priority, its runs waiting longer than the aging period (usually none): a claim
# costs about the same with 100 or 1,000,000 runs waiting. The candidates are ranked
# within their tenant by effective priority (one level higher per aging period waited,
# so a low run under a steady stream of high ones still starts), then taken round by
# round: a tenant's k-th run comes in round k / weight, ties going to priority then due
# time. When the shares leave the batch short (few tenants, or their runs not due yet),
# it is topped up from each tenant's runs past its share (the same index walk, on from
# where the share stopped), in priority order, gated on being short: fairness never costs
# claim rate.
#
# A tenant with max_running takes at most its room (max_running less its running runs,
# cluster-wide: cronwheel_claim_rooms, migration 0016) from a claim, top-up included; the
# rest of its runs stay pending.
#
# A run with a concurrency key (decision 0031) is not in its tenant's slice: the keys with
# pending runs in each pool are found by a loose index scan of runs_keyed (one probe per
# (tenant, key)), their room (the limit less the key's running runs, cluster-wide:
# cronwheel_claim_key_rooms, migration 0019) counted under a lock with a fresh snapshot,
# and each key with room gives at most its room of runs, read from its own slice of
# runs_keyed. A key at its limit costs its one probe and never holds back other keys or
# runs without a key. The runs taken then take their turns with their tenant's others. A
# claim that meets no keyed run pays one probe per pool, and no lock.
#
# Runs under an overlap policy (few: runs_overlap) are claimed only once due and only as
# their job's earliest due run (its head); ``queue`` heads wait while their job runs,
# ``skip`` runs are skipped instead, ``replace`` heads displace the running run. They
# take their turn with their tenant's other runs. The few rows locked and not taken are
# free again at commit.
# ``lean``: what _lean.GUARD would answer over this snapshot, from this statement's own
# CTEs (one probe more, not five: every probe is planned at every claim). With no key
# waiting, ``weights`` holds the tenants with runs pending, with their caps.
_LEAN = f"""(SELECT count(*) FROM weights) <= 1
       AND NOT EXISTS (SELECT 1 FROM waiting_keys)
       AND NOT EXISTS (SELECT 1 FROM weights WHERE max_running IS NOT NULL)
       AND NOT {DUE_POLICY.format(pools="$2", tenant="$8", now="$5")}"""
_RUN_PICK = "id, job_id, overlap, priority, available_at, tenant_id, concurrency_key"
# A run's effective priority (one level higher per aging period waited): ranked's order.
_EFFECTIVE = """greatest(0, {run}.priority - greatest(0, floor(
                     extract(epoch FROM $5::timestamptz - {run}.available_at)::float8 / $9::float8
                 )))::int"""
CLAIM_RUNS = f"""
WITH RECURSIVE skipped AS (
    UPDATE runs AS r SET state = 'skipped', reason = $7, finished_at = $5
    FROM (
        SELECT s.id FROM runs AS s
        WHERE s.state = 'pending' AND s.overlap <> 'allow' AND s.overlap = 'skip'
          AND s.pool = ANY($2::text[]) AND s.available_at <= $5
          AND ($8::text IS NULL OR s.tenant_id = $8)
          AND {JOB_IS_BUSY.format(run="s")}
        FOR UPDATE SKIP LOCKED
    ) AS s
    WHERE r.id = s.id
    RETURNING r.id, r.tenant_id, r.job_id, r.scheduled_for, r.attempt, r.reason
),{_outbox("skipped", "'skipped'", "s.reason", "$5::timestamptz")}
waiting AS (
    SELECT p.pool, t.tenant_id FROM unnest($2::text[]) AS p(pool)
    CROSS JOIN LATERAL (
        SELECT tenant_id FROM runs
        WHERE state = 'pending' AND concurrency_key IS NULL AND pool = p.pool
          AND ($8::text IS NULL OR tenant_id = $8)
        ORDER BY tenant_id LIMIT 1
    ) AS t
    UNION ALL
    SELECT w.pool, t.tenant_id FROM waiting AS w
    CROSS JOIN LATERAL (
        SELECT tenant_id FROM runs
        WHERE state = 'pending' AND concurrency_key IS NULL AND pool = w.pool
          AND tenant_id > w.tenant_id AND ($8::text IS NULL OR tenant_id = $8)
        ORDER BY tenant_id LIMIT 1
    ) AS t
),
waiting_keys AS (
    SELECT p.pool, k.tenant_id, k.concurrency_key, k.concurrency_limit
    FROM unnest($2::text[]) AS p(pool)
    CROSS JOIN LATERAL (
        SELECT tenant_id, concurrency_key, concurrency_limit FROM runs
        WHERE state = 'pending' AND concurrency_key IS NOT NULL AND pool = p.pool
          AND ($8::text IS NULL OR tenant_id = $8)
        ORDER BY tenant_id, concurrency_key, priority, available_at LIMIT 1
    ) AS k
    UNION ALL
    SELECT w.pool, k.tenant_id, k.concurrency_key, k.concurrency_limit
    FROM waiting_keys AS w
    CROSS JOIN LATERAL (
        SELECT tenant_id, concurrency_key, concurrency_limit FROM runs
        WHERE state = 'pending' AND concurrency_key IS NOT NULL AND pool = w.pool
          AND (tenant_id, concurrency_key) > (w.tenant_id, w.concurrency_key)
          AND ($8::text IS NULL OR tenant_id = $8)
        ORDER BY tenant_id, concurrency_key, priority, available_at LIMIT 1
    ) AS k
),
key_limits AS (
    -- A key pending in several pools counts once, at its smallest limit.
    SELECT tenant_id, concurrency_key, min(concurrency_limit) AS lim
    FROM waiting_keys GROUP BY tenant_id, concurrency_key
),
key_rooms AS (
    -- What each key may still start (its limit less its running runs), counted after
    -- the lock: no lock and no count when no keyed run is waiting.
    SELECT out_tenant AS tenant_id, out_key AS concurrency_key, out_room AS room
    FROM cronwheel_claim_key_rooms(
        array(SELECT tenant_id FROM key_limits ORDER BY tenant_id, concurrency_key),
        array(SELECT concurrency_key FROM key_limits ORDER BY tenant_id, concurrency_key),
        array(SELECT lim FROM key_limits ORDER BY tenant_id, concurrency_key)
    )
),
weights AS (
    -- A primary-key probe per tenant waiting, never a scan of every tenant.
    SELECT w.tenant_id, coalesce(t.claim_weight, 1) AS weight, t.max_running
    -- The tenants waiting with runs without a key (runs_fair) or with one (runs_keyed).
    FROM (SELECT tenant_id FROM waiting UNION SELECT tenant_id FROM waiting_keys) AS w
    LEFT JOIN LATERAL (
        SELECT claim_weight, max_running FROM tenants WHERE id = w.tenant_id OFFSET 0
    ) AS t ON true
),
rooms AS (
    -- What each capped tenant may still start (max_running less its running runs).
    SELECT out_tenant AS tenant_id, out_room AS room FROM cronwheel_claim_rooms(
        array(SELECT tenant_id FROM weights WHERE max_running IS NOT NULL ORDER BY 1),
        array(SELECT max_running FROM weights WHERE max_running IS NOT NULL ORDER BY tenant_id)
    )
),
shares AS (
    SELECT s.*, least(s.fair, s.room) AS share FROM (
        SELECT w.pool, w.tenant_id, g.weight,
               ceil($4::int * g.weight / (SELECT sum(weight) FROM weights))::int AS fair,
               coalesce((SELECT room FROM rooms AS m WHERE m.tenant_id = w.tenant_id), $4)
                   AS room
        FROM waiting AS w JOIN weights AS g ON g.tenant_id = w.tenant_id
    ) AS s
),
fair AS (
    SELECT c.*, s.weight FROM shares AS s
    CROSS JOIN LATERAL (
        SELECT {_RUN_PICK} FROM runs
        WHERE state = 'pending' AND pool = s.pool AND tenant_id = s.tenant_id
          AND available_at <= $3 AND overlap = 'allow' AND attempt < max_attempts
          AND concurrency_key IS NULL
        ORDER BY priority, available_at
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) AS c
    UNION ALL
    SELECT c.*, s.weight FROM shares AS s
    CROSS JOIN generate_series(1, 3) AS q(priority)
    CROSS JOIN LATERAL (
        SELECT {_RUN_PICK} FROM runs
        WHERE state = 'pending' AND pool = s.pool AND tenant_id = s.tenant_id
          AND priority = q.priority
          AND available_at <= least($3, $5 - make_interval(secs => $9::float8))
          AND overlap = 'allow' AND attempt < max_attempts AND concurrency_key IS NULL
        ORDER BY available_at
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) AS c
),
keyed_slices AS (
    -- Each key with room: its first runs in priority then due order, up to its room.
    SELECT c.*, coalesce(g.weight, 1) AS weight FROM waiting_keys AS w
    JOIN key_rooms AS m
        ON m.tenant_id = w.tenant_id AND m.concurrency_key = w.concurrency_key AND m.room > 0
    LEFT JOIN weights AS g ON g.tenant_id = w.tenant_id
    CROSS JOIN LATERAL (
        SELECT {_RUN_PICK} FROM runs
        WHERE state = 'pending' AND concurrency_key = w.concurrency_key AND pool = w.pool
          AND tenant_id = w.tenant_id AND available_at <= $3 AND overlap = 'allow'
          AND attempt < max_attempts
        ORDER BY priority, available_at
        LIMIT least(m.room, $4)
        FOR UPDATE SKIP LOCKED
    ) AS c
),
keyed AS (
    -- A key pending in several pools gives at most its room in all.
    SELECT k.id, k.job_id, k.overlap, k.priority, k.available_at, k.tenant_id,
           k.concurrency_key, k.weight
    FROM (
        SELECT s.*, row_number() OVER (
            PARTITION BY s.tenant_id, s.concurrency_key ORDER BY s.priority, s.available_at
        ) AS knth
        FROM keyed_slices AS s
    ) AS k
    JOIN key_rooms AS m ON m.tenant_id = k.tenant_id AND m.concurrency_key = k.concurrency_key
    WHERE k.knth <= m.room
),
heads AS (
    SELECT DISTINCT ON (job_id) id, job_id, overlap, tenant_id, concurrency_key,
           {_EFFECTIVE.format(run="runs")} AS effective, available_at
    FROM runs
    WHERE state = 'pending' AND overlap <> 'allow' AND pool = ANY($2::text[])
      AND available_at <= $5 AND attempt < max_attempts AND ($8::text IS NULL OR tenant_id = $8)
    ORDER BY job_id, scheduled_for
),
policed AS (
    -- A head being claimed by someone else is skipped, and its job waits: one at a time.
    -- A tenant's heads without a key are locked and checked in ranked's order until $4
    -- pass, the rest neither locked nor probed (a claim of 250 among 10,000 one-time
    -- jobs under a policy locked and probed all 10,000). The same runs are picked: a
    -- run past its tenant's first $4 in that order turns after $4 of its tenant's runs,
    -- so a claim of $4 never reaches it, and when any is left out ranked holds $4 runs
    -- or more, so topped takes nothing, as before. The sort is the subquery's, kept by
    -- the nested loop: the ORDER BY above it sorts nothing and the LIMIT stops the loop.
    SELECT r.id, r.job_id, r.overlap, r.priority, r.available_at, r.tenant_id,
           r.concurrency_key
    FROM (SELECT DISTINCT tenant_id FROM heads WHERE concurrency_key IS NULL) AS t
    CROSS JOIN LATERAL (
        SELECT r.*, h.effective, h.sort_at, h.sort_id FROM (
            SELECT h.id, h.job_id, h.overlap, h.effective, h.available_at AS sort_at,
                   h.id AS sort_id
            FROM heads AS h
            WHERE h.tenant_id = t.tenant_id AND h.concurrency_key IS NULL
            ORDER BY h.effective, h.available_at, h.id
        ) AS h
        CROSS JOIN LATERAL (
            SELECT {_RUN_PICK}, state FROM runs
            WHERE id = h.id OFFSET 0
            FOR UPDATE SKIP LOCKED
        ) AS r
        WHERE r.state = 'pending'
          AND (h.overlap = 'replace' OR NOT {JOB_IS_BUSY.format(run="h")})
        ORDER BY h.effective, h.sort_at, h.sort_id
        LIMIT $4
    ) AS r
    UNION ALL
    -- Heads with a key (usually none) share their key's room in policed_fit: all of them.
    SELECT r.id, r.job_id, r.overlap, r.priority, r.available_at, r.tenant_id,
           r.concurrency_key
    FROM heads AS h
    CROSS JOIN LATERAL (
        SELECT {_RUN_PICK}, state FROM runs
        WHERE id = h.id OFFSET 0
        FOR UPDATE SKIP LOCKED
    ) AS r
    WHERE h.concurrency_key IS NOT NULL AND r.state = 'pending'
      AND (h.overlap = 'replace' OR NOT {JOB_IS_BUSY.format(run="h")})
),
policed_fit AS (
    -- Heads with a key (several jobs may share one) take what room the key's slices
    -- left, in priority then due order. Usually no head at all: no work.
    SELECT p.id, p.job_id, p.overlap, p.priority, p.available_at, p.tenant_id,
           p.concurrency_key
    FROM (
        SELECT p.*, row_number() OVER (
            PARTITION BY p.tenant_id, p.concurrency_key ORDER BY p.priority, p.available_at, p.id
        ) AS knth
        FROM policed AS p
    ) AS p
    WHERE CASE WHEN p.concurrency_key IS NULL THEN true
               ELSE p.knth <= coalesce((
                   SELECT m.room FROM key_rooms AS m
                   WHERE m.tenant_id = p.tenant_id AND m.concurrency_key = p.concurrency_key
               ), 0) - (
                   SELECT count(*) FROM keyed AS k
                   WHERE k.tenant_id = p.tenant_id AND k.concurrency_key = p.concurrency_key
               )
          END
),
ranked AS (
    SELECT c.*, (row_number() OVER (
        PARTITION BY c.tenant_id
        ORDER BY {_EFFECTIVE.format(run="c")}, c.available_at, c.id
    ) - 1) / c.weight AS turn
    FROM (
        SELECT DISTINCT ON (u.id) u.* FROM (
            SELECT * FROM fair
            UNION ALL
            SELECT * FROM keyed
            UNION ALL
            SELECT p.*, coalesce(g.weight, 1) FROM policed_fit AS p
            LEFT JOIN weights AS g ON g.tenant_id = p.tenant_id
        ) AS u
        ORDER BY u.id
    ) AS c
),
topped AS (
    -- Past its share, each tenant's next runs in the same order (OFFSET skips the share,
    -- held by this claim): only when the shares left the batch short.
    SELECT c.*, s.weight, 'Infinity'::float8 AS turn
    FROM shares AS s
    CROSS JOIN LATERAL (
        SELECT {_RUN_PICK} FROM runs
        WHERE state = 'pending' AND pool = s.pool AND tenant_id = s.tenant_id
          AND available_at <= $3 AND overlap = 'allow' AND attempt < max_attempts
          AND concurrency_key IS NULL
        ORDER BY priority, available_at
        OFFSET s.share
        LIMIT least($4 - (SELECT count(*) FROM ranked), s.room - s.share)
        FOR UPDATE SKIP LOCKED
    ) AS c
    WHERE (SELECT count(*) FROM ranked) < $4 AND s.room > s.share
),
picked AS (
    -- A capped tenant's runs past its room stay pending (the top-up may bring them).
    SELECT c.id, c.job_id, c.overlap, c.priority, c.available_at, c.tenant_id, c.turn
    FROM (
        SELECT d.*, row_number() OVER (
            PARTITION BY d.tenant_id ORDER BY d.turn, d.priority, d.available_at, d.id
        ) AS nth
        FROM (
            SELECT DISTINCT ON (u.id) u.* FROM (
                SELECT * FROM ranked UNION ALL SELECT * FROM topped
            ) AS u
            ORDER BY u.id, u.turn
        ) AS d
    ) AS c
    WHERE c.nth <= coalesce((SELECT room FROM rooms AS m WHERE m.tenant_id = c.tenant_id), $4)
    ORDER BY c.turn, c.priority, c.available_at, c.id
    LIMIT $4
),
replaced AS (
    UPDATE runs AS r SET cancel_requested = true
    FROM (
        SELECT o.id FROM picked AS n
        CROSS JOIN LATERAL (
            SELECT id FROM runs WHERE job_id = n.job_id AND state = 'running' OFFSET 0
        ) AS o
        WHERE n.overlap = 'replace'
    ) AS displaced
    WHERE r.id = displaced.id
),
claimed AS (
    UPDATE runs AS r
    SET state = 'running', fence = r.fence + 1, attempt = r.attempt + 1, lease_owner = $1,
        lease_expires_at = greatest(r.available_at, $5) + make_interval(secs => $6),
        started_at = CASE WHEN $10::bool THEN greatest(r.available_at, $5) END,
        cancel_requested = false
    -- An array of ids: a primary-key probe each, whatever the estimates of the CTEs
    -- above (joined to them, a stale estimate made it a scan of every run).
    WHERE r.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING r.*
)
-- The count of skipped runs rides on every row, and on a row of NULL run columns when
-- nothing was claimed: the worker's metrics get it without a statement of their own.
-- The rows come in turn order: the worker starts them in that order.
-- ``lean``: whether the lean claim would have done (_lean.GUARD), for the next claim.
SELECT x.*, k.overlap_skipped, {_LEAN} AS lean
FROM (SELECT count(*) AS overlap_skipped FROM skipped) AS k
LEFT JOIN (
    SELECT c.*, {JOB_COLUMNS}, p.turn AS turn
    FROM claimed AS c
    JOIN picked AS p ON p.id = c.id
    -- OFFSET 0 keeps this a primary-key probe per claimed run; flattened into a join, it
    -- would hash the whole jobs table on every claim.
    CROSS JOIN LATERAL (SELECT * FROM jobs WHERE id = c.job_id OFFSET 0) AS j
) AS x ON true
ORDER BY x.turn, x.priority, x.available_at, x.id"""

# Batched worker writes are driven by their input: each run is locked through a LATERAL
# primary-key lookup and checked (fence, state) outside it, OFFSET 0 keeping the planner
# from pushing the checks back in; the UPDATE then joins that one relation to runs on the
# primary key alone. The plan is the same whatever the table statistics say: statistics
# taken while few runs were running make a "state = 'running'" scan of runs_leases look
# free, and one such scan per input row is quadratic. The input comes sorted by run id
# (the caller sorts it), so a worker's heartbeat and its completions, sent over two
# connections at once, lock rows in the same order: they queue, never deadlock.

# How a worker's report (progress, message, checkpoint as JSON text, in relation {d}) is
# stored, stamped {at}: a NULL progress or checkpoint keeps the stored one.
_REPORTED = """    progress = coalesce({d}.progress, r.progress),
    progress_message = CASE WHEN {d}.progress IS NULL THEN r.progress_message
                            ELSE {d}.message END,
    progress_at = CASE WHEN {d}.progress IS NULL THEN r.progress_at ELSE {at} END,
    checkpoint = coalesce({d}.checkpoint::jsonb, r.checkpoint),
    checkpoint_at = CASE WHEN {d}.checkpoint IS NULL THEN r.checkpoint_at ELSE {at} END"""

# Params: $1 worker, $2 run ids (ascending), $3 fences, $4 now, $5 lease seconds; with
# reports (only when some run has one: the common heartbeat keeps the short statement)
# also $6 progress (NULL: none new), $7 progress messages, $8 checkpoints as JSON text
# (NULL: none new), stored in the same write and stamped $4.
_HEARTBEAT = """
WITH held AS (
    SELECT l.*
    FROM unnest($2::bigint[], $3::int[]{report_arrays}) AS l(id, fence{report_columns})
    CROSS JOIN LATERAL (
        SELECT fence, lease_owner, state FROM runs WHERE id = l.id OFFSET 0 FOR NO KEY UPDATE
    ) AS r
    WHERE r.fence = l.fence AND r.lease_owner = $1 AND r.state = 'running'
)
UPDATE runs AS r
SET lease_expires_at = greatest(
        r.lease_expires_at, $4::timestamptz + make_interval(secs => $5)){reported}
FROM held
WHERE r.id = held.id
RETURNING r.id, r.cancel_requested"""

HEARTBEAT = _HEARTBEAT.format(report_arrays="", report_columns="", reported="")
HEARTBEAT_WITH_REPORTS = _HEARTBEAT.format(
    report_arrays=", $6::float8[], $7::text[], $8::text[]",
    report_columns=", progress, message, checkpoint",
    reported=",\n" + _REPORTED.format(d="held", at="$4::timestamptz"),
)

# Params: $1 worker, $2 run ids (ascending), $3 fences, $4 started_at. Locked and planned
# like _HEARTBEAT (the worker's heartbeat and completions may be in flight beside it).
# "started_at IS NULL": a start once recorded is never moved (a mark sent again).
MARK_STARTED = """
WITH begun AS (
    SELECT m.*
    FROM unnest($2::bigint[], $3::int[], $4::timestamptz[]) AS m(id, fence, started_at)
    CROSS JOIN LATERAL (
        SELECT fence, lease_owner, state, started_at FROM runs WHERE id = m.id OFFSET 0
        FOR NO KEY UPDATE
    ) AS r
    WHERE r.fence = m.fence AND r.lease_owner = $1 AND r.state = 'running'
      AND r.started_at IS NULL
)
UPDATE runs AS r
SET started_at = begun.started_at
FROM begun
WHERE r.id = begun.id
RETURNING r.id"""

_REPORTED_AT_FINISH = _REPORTED.format(d="d", at="d.finished_at")

# Params: the completions' columns, ascending run id (see _rows.completion_columns).
COMPLETE_RUNS = f"""
WITH done AS (
    SELECT d.* FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[],
                           $6::timestamptz[], $7::timestamptz[], $8::float8[], $9::text[],
                           $10::text[], $11::timestamptz[], $12::text[], $13::int[],
                           $14::float8[], $15::text[], $16::text[], $17::text[],
                           $18::text[])
        AS d(run_id, fence, worker_id, state, outcome, started_at, finished_at, lag_seconds,
             error_class, error_message, available_at, reason, http_status, progress,
             message, checkpoint, result, output)
    CROSS JOIN LATERAL (
        SELECT fence, state FROM runs WHERE id = d.run_id OFFSET 0 FOR NO KEY UPDATE
    ) AS r
    WHERE r.fence = d.fence AND r.state = 'running'
),
accepted AS (
    UPDATE runs AS r
    SET state = d.state,
        finished_at = CASE WHEN d.state IN {FINISHED_STATES} THEN d.finished_at END,
        available_at = coalesce(d.available_at, r.available_at),
        lease_owner = NULL, lease_expires_at = NULL, cancel_requested = false,
        last_error = d.error_message, reason = coalesce(d.reason, r.reason),
        result = coalesce(d.result::jsonb, r.result),
        -- A run claimed ahead and never marked: its completion says when it started.
        started_at = coalesce(r.started_at, d.started_at),
{_REPORTED_AT_FINISH}
    FROM done AS d
    WHERE r.id = d.run_id
    RETURNING r.id, r.tenant_id, r.job_id, r.attempt, r.pool, r.state, d.worker_id, d.fence,
              d.started_at, d.finished_at, d.lag_seconds, d.outcome, d.error_class,
              d.error_message, d.http_status, d.output, r.scheduled_for
),{_outbox("accepted", _OUTCOME_EVENT, "s.error_message", "s.finished_at")}
recorded AS (
    INSERT INTO attempts (tenant_id, run_id, job_id, attempt, worker_id, fence, started_at,
                          finished_at, lag_seconds, outcome, error_class, error_message,
                          http_status, output)
    SELECT tenant_id, id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status, output
    FROM accepted
),{_wake_pools("accepted")}
SELECT array(SELECT id FROM accepted) AS accepted, (SELECT count(*) FROM woken) AS woken"""

# -- maintenance ---------------------------------------------------------------------

# The verdict of lifecycle.rescue, for a batch: the SQL must answer as the function does
# (tests/store/test_transitions.py holds it to it, decision 0040).
# Params of both rescues: $1 now, $2 limit, $3 the reason of an at-most-once run made
# dead, $4 that of a run that was on its last attempt (and $5 the dead owners, text[]).
# A run without started_at was claimed ahead and its start was not stored. At-most-once,
# it never began (its start is stored before it begins): it is unclaimed as RELEASE_RUNS
# unclaims a run released before its start (attempt back down, its previous attempt's
# start back, no attempt row, no event, its budget and due time untouched), pending again,
# or cancelled if that was asked for. Any other may have begun (its start is written
# beside its action): a lost attempt is recorded without a start, not charged (its budget
# one more), no event, pending again at its due time or cancelled: its attempt number is
# never used twice.
_RESCUE = """
WITH expired AS (
    SELECT id, job_id AS id_job, lease_owner, lease_expires_at, attempt, max_attempts,
           cancel_requested, started_at IS NOT NULL AS started
    FROM runs
    WHERE state = 'running' AND {which}
    ORDER BY lease_expires_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
verdict AS (
    -- An at-most-once run may have started before its worker vanished: it is never
    -- started again, whatever its budget says.
    SELECT e.id, e.lease_owner, e.lease_expires_at, e.started,
           NOT e.started AND j.delivery = 'at_most_once' AS unclaim,
           CASE WHEN e.cancel_requested THEN 'cancelled'
                WHEN NOT e.started THEN 'pending'
                WHEN j.delivery = 'at_most_once' OR e.attempt >= e.max_attempts THEN 'dead'
                ELSE 'pending' END AS next_state,
           CASE WHEN j.delivery = 'at_most_once' THEN $3 ELSE $4 END AS dead_reason,
           {message} || CASE WHEN e.started THEN '' ELSE {unstarted_note} END AS message
    FROM expired AS e
    CROSS JOIN LATERAL (SELECT delivery FROM jobs WHERE id = e.id_job OFFSET 0) AS j
),
rescued AS (
    UPDATE runs AS r
    SET state = v.next_state,
        attempt = CASE WHEN v.unclaim THEN r.attempt - 1 ELSE r.attempt END,
        max_attempts = CASE WHEN NOT v.started AND NOT v.unclaim AND v.next_state = 'pending'
                            THEN r.max_attempts + 1 ELSE r.max_attempts END,
        started_at = CASE WHEN v.unclaim THEN (
            SELECT a.started_at FROM attempts AS a
            WHERE a.run_id = r.id AND a.attempt = r.attempt - 1
            ORDER BY a.id DESC LIMIT 1) ELSE r.started_at END,
        available_at = CASE WHEN v.started AND v.next_state = 'pending' THEN $1
                            ELSE r.available_at END,
        finished_at = CASE WHEN v.next_state = 'pending' THEN NULL ELSE $1 END,
        reason = CASE WHEN v.next_state = 'dead' THEN v.dead_reason ELSE r.reason END,
        lease_owner = NULL, lease_expires_at = NULL, cancel_requested = false,
        last_error = CASE WHEN v.unclaim THEN r.last_error ELSE v.message END
    FROM verdict AS v
    WHERE r.id = v.id
    RETURNING r.id, r.tenant_id, r.job_id, r.attempt, r.fence, r.pool, r.state, r.started_at,
              v.lease_owner, v.lease_expires_at, v.message, r.scheduled_for, v.started,
              v.unclaim
),{outbox}
recorded AS (
    INSERT INTO attempts (tenant_id, run_id, job_id, attempt, worker_id, fence, started_at,
                          finished_at, outcome, error_class, error_message)
    SELECT tenant_id, id, job_id, attempt, lease_owner, fence, started_at, $1, 'lost',
           '{error_class}', message
    FROM rescued
    WHERE NOT unclaim
),{wake}
SELECT array(SELECT id FROM rescued WHERE state = 'pending' AND NOT unclaim
             ORDER BY lease_expires_at, id) AS retried,
       array(SELECT id FROM rescued WHERE state = 'dead' ORDER BY lease_expires_at, id)
           AS dead,
       array(SELECT id FROM rescued WHERE state = 'cancelled' ORDER BY lease_expires_at, id)
           AS cancelled,
       array(SELECT id FROM rescued WHERE state = 'pending' AND unclaim
             ORDER BY lease_expires_at, id) AS unstarted,
       (SELECT count(*) FROM woken) AS woken"""

# The end of a lost attempt's error when the run's start was not stored, as a literal.
_UNSTARTED_NOTE = "'" + UNSTARTED_LOST_NOTE.replace("'", "''") + "'"

# Only a run that had started has an attempt to tell of (a lost attempt of a run whose
# start was not stored is no failure of its budget).
_RESCUE_EVENT = f"CASE WHEN s.started THEN {_OUTCOME_EVENT} END"

# The expiry is spelled like Python's isoformat().
RESCUE_EXPIRED = _RESCUE.format(
    which="lease_expires_at <= $1",
    message="""format('worker %s did not report before its lease expired at %s', e.lease_owner,
                  replace(to_char(e.lease_expires_at AT TIME ZONE 'UTC',
                                  'YYYY-MM-DD"T"HH24:MI:SS.US'), '.000000', '') || '+00:00'
           )""",
    error_class="LeaseExpired",
    unstarted_note=_UNSTARTED_NOTE,
    outbox=_outbox("rescued", _RESCUE_EVENT, "s.message", "$1::timestamptz"),
    wake=_wake_pools("rescued"),
)

RESCUE_DEAD_OWNERS = _RESCUE.format(
    which="lease_owner = ANY($5::text[])",
    message="format('worker %s ended without reporting (its process died)', e.lease_owner)",
    error_class="WorkerGone",
    unstarted_note=_UNSTARTED_NOTE,
    outbox=_outbox("rescued", _RESCUE_EVENT, "s.message", "$1::timestamptz"),
    wake=_wake_pools("rescued"),
)

# The verdict of lifecycle.release, for a batch, held to it as _RESCUE is.
# Params: $1 run ids (ascending), $2 fences, $3 worker ids, $4 started flags, $5 why,
# $6 now, $7 the reason of an at-most-once run made dead. Locked like COMPLETE_RUNS; the
# job is read for its delivery. Only the runs that had started get an attempt row.
RELEASE_RUNS = f"""
WITH given AS (
    SELECT g.*, r.cancel_requested, j.delivery
    FROM unnest($1::bigint[], $2::int[], $3::text[], $4::bool[], $5::text[])
        AS g(run_id, fence, worker_id, started, why)
    CROSS JOIN LATERAL (
        SELECT fence, state, job_id, cancel_requested FROM runs WHERE id = g.run_id OFFSET 0
        FOR NO KEY UPDATE
    ) AS r
    CROSS JOIN LATERAL (SELECT delivery FROM jobs WHERE id = r.job_id OFFSET 0) AS j
    WHERE r.fence = g.fence AND r.state = 'running'
),
verdict AS (
    SELECT g.*, CASE WHEN g.cancel_requested THEN 'cancelled'
                     WHEN g.started AND g.delivery = 'at_most_once' THEN 'dead'
                     ELSE 'pending' END AS next_state
    FROM given AS g
),
released AS (
    -- Started: back to pending, the budget is given back (the claim counted an attempt
    -- that the run did not get to finish, and no claim may exceed max_attempts). Not
    -- started: the claim is undone but for its fence (fences only grow): the attempt
    -- number goes back, the run's start is its previous attempt's again, and nothing is
    -- recorded, as if it was never claimed.
    UPDATE runs AS r
    SET state = v.next_state,
        attempt = CASE WHEN v.started THEN r.attempt ELSE r.attempt - 1 END,
        started_at = CASE WHEN v.started THEN r.started_at ELSE (
            SELECT a.started_at FROM attempts AS a
            WHERE a.run_id = r.id AND a.attempt = r.attempt - 1
            ORDER BY a.id DESC LIMIT 1) END,
        available_at = CASE WHEN v.started AND v.next_state = 'pending'
                            THEN greatest(r.available_at, $6) ELSE r.available_at END,
        finished_at = CASE WHEN v.next_state = 'pending' THEN NULL ELSE $6 END,
        max_attempts = CASE WHEN v.started AND v.next_state = 'pending'
                            THEN r.max_attempts + 1 ELSE r.max_attempts END,
        reason = CASE WHEN v.next_state = 'dead' THEN $7 ELSE r.reason END,
        lease_owner = NULL, lease_expires_at = NULL, cancel_requested = false,
        last_error = CASE WHEN v.started THEN v.why ELSE r.last_error END
    FROM verdict AS v
    WHERE r.id = v.run_id
    RETURNING r.id, r.tenant_id, r.job_id, r.attempt, r.pool, r.state, r.started_at,
              v.worker_id, v.fence, v.started, v.why, r.scheduled_for
),{_outbox("released", "CASE WHEN s.state = 'dead' THEN 'dead' END", "s.why", "$6::timestamptz")}
recorded AS (
    INSERT INTO attempts (tenant_id, run_id, job_id, attempt, worker_id, fence, started_at,
                          finished_at, outcome, error_class, error_message)
    SELECT tenant_id, id, job_id, attempt, worker_id, fence, started_at, $6, 'cancelled',
           'WorkerShutdown', why
    FROM released
    WHERE started
),{_wake_pools("released")}
SELECT array(SELECT id FROM released WHERE state = 'pending' ORDER BY id) AS retried,
       array(SELECT id FROM released WHERE state = 'dead' ORDER BY id) AS dead,
       array(SELECT id FROM released WHERE state = 'cancelled' ORDER BY id) AS cancelled,
       (SELECT count(*) FROM woken) AS woken"""

# A run's attempts go with it: no foreign key deletes them (migration 0024).
DELETE_HISTORY = f"""
WITH doomed AS (
    SELECT id FROM runs
    WHERE finished_at < $1 AND state IN {FINISHED_STATES}
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM runs AS r USING doomed WHERE r.id = doomed.id RETURNING r.id
),
gone_attempts AS (
    DELETE FROM attempts AS a USING gone WHERE a.run_id = gone.id
)
SELECT count(*) FROM gone"""

# Pool rate limits (decision 0033). Params of the take: $1 pool, $2 tokens wanted
# (negative: given back), $3 now. The bucket holds one second's worth (at least one).
TAKE_POOL_TOKENS = """
WITH bucket AS (
    SELECT pool, greatest(per_second, 1) AS capacity,
           least(greatest(per_second, 1),
                 tokens + greatest(0, extract(epoch FROM $3::timestamptz - refilled_at))
                          * per_second) AS have
    FROM pool_rates WHERE pool = $1
    FOR UPDATE
),
taken AS (
    SELECT pool, capacity, have,
           CASE WHEN $2::int < 0 THEN $2::int::float8 ELSE least($2::int, floor(have)) END AS n
    FROM bucket
)
UPDATE pool_rates AS p
SET tokens = least(t.capacity, t.have - t.n), refilled_at = greatest(p.refilled_at, $3)
FROM taken AS t
WHERE p.pool = t.pool
RETURNING t.n::int AS n"""

SET_POOL_RATE = """
INSERT INTO pool_rates (pool, per_second, tokens, refilled_at, updated_at)
VALUES ($1, $2::float8, greatest($2::float8, 1), $3, $3)
ON CONFLICT (pool) DO UPDATE
SET per_second = excluded.per_second,
    tokens = least(pool_rates.tokens, greatest($2::float8, 1)),
    updated_at = excluded.updated_at"""

DELETE_PIPELINE_HISTORY = """
WITH doomed AS (
    SELECT id FROM pipeline_runs
    WHERE finished_at < $1
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
tasks AS (
    DELETE FROM pipeline_tasks AS t USING doomed WHERE t.pipeline_run_id = doomed.id
)
DELETE FROM pipeline_runs AS p USING doomed WHERE p.id = doomed.id"""

# -- notifications -------------------------------------------------------------------

# Params: $1 now, $2 limit, $3 lease seconds.
CLAIM_NOTIFICATIONS = """
WITH due AS (
    SELECT id FROM notifications
    WHERE state = 'pending' AND next_at <= $1
    ORDER BY next_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE notifications AS n
SET tries = n.tries + 1, next_at = $1 + make_interval(secs => $3)
FROM due
WHERE n.id = due.id
RETURNING n.*"""

# Params: $1 ids (ascending), $2 tries, $3 delivered, $4 errors, $5 retry_at, $6 now.
FINISH_NOTIFICATIONS = """
UPDATE notifications AS n
SET state = CASE WHEN f.delivered THEN 'delivered' WHEN f.retry_at IS NULL THEN 'dead'
                 ELSE 'pending' END,
    next_at = coalesce(f.retry_at, n.next_at),
    finished_at = CASE WHEN f.delivered OR f.retry_at IS NULL THEN $6::timestamptz END,
    last_error = CASE WHEN f.delivered THEN n.last_error ELSE f.error END
FROM unnest($1::bigint[], $2::int[], $3::bool[], $4::text[], $5::timestamptz[])
    AS f(id, tries, delivered, error, retry_at)
WHERE n.id = f.id AND n.tries = f.tries AND n.state = 'pending'
RETURNING n.id"""

# Params: $1 tenant, $2 ids, $3 now.
REPLAY_NOTIFICATIONS = """
UPDATE notifications SET state = 'pending', tries = 0, next_at = $3, finished_at = NULL
WHERE tenant_id = $1 AND id = ANY($2::bigint[]) AND state = 'dead'
RETURNING id"""

DELETE_NOTIFICATIONS = """
DELETE FROM notifications WHERE id IN (
    SELECT id FROM notifications WHERE finished_at < $1 AND state <> 'pending'
    ORDER BY finished_at LIMIT $2
)"""

# -- run control ---------------------------------------------------------------------

LOCK_RUN = "SELECT state, cancel_requested FROM runs WHERE tenant_id = $1 AND id = $2 FOR UPDATE"

# Params: $1 run id, $2 now, $3 reason, $4 actor.
CANCEL_PENDING_RUN = """
WITH run AS (
    UPDATE runs SET state = 'cancelled', finished_at = $2, reason = $3
    WHERE id = $1
    RETURNING *
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at)
    SELECT tenant_id, 'run', id::text, 'cancelled', $4, $2 FROM run
)
SELECT * FROM run"""

# Params: $1 run id, $2 now, $3 actor.
REQUEST_CANCEL = """
WITH run AS (
    UPDATE runs SET cancel_requested = true WHERE id = $1 RETURNING *
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at)
    SELECT tenant_id, 'run', id::text, 'cancel_requested', $3, $2 FROM run
)
SELECT * FROM run"""

# Live or archived (decision 0032): the reads that may concern a finished run select from
# all_runs and all_attempts.
GET_RUN = "SELECT * FROM all_runs WHERE tenant_id = $1 AND id = $2"

# Params: $1 tenant, $2 run ids, $3 now, $4 extra attempts, $5 actor, $6 the reason
# (lifecycle.replay_reason). The verdict of lifecycle.replay, for a batch.
REPLAY_RUNS = f"""
WITH replayed AS (
    UPDATE runs
    SET state = 'pending', available_at = $3, finished_at = NULL, max_attempts = attempt + $4,
        last_error = NULL, lease_owner = NULL, lease_expires_at = NULL, cancel_requested = false,
        reason = $6
    WHERE tenant_id = $1 AND id = ANY($2::bigint[]) AND state = 'dead'
    RETURNING id, tenant_id, pool, state
),
audited AS (
    INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at)
    SELECT tenant_id, 'run', id::text, 'replayed', $5, $3 FROM replayed ORDER BY id
),{_wake_pools("replayed")}
SELECT array(SELECT id FROM replayed) AS replayed, (SELECT count(*) FROM woken) AS woken"""

# -- reads ---------------------------------------------------------------------------

LIST_ATTEMPTS = (
    "SELECT * FROM all_attempts WHERE tenant_id = $1 AND run_id = $2 ORDER BY attempt, id"
)

# The live view's reads (list_activity), each along an index: the attempts' key,
# runs_leases, runs_finished and runs_claimable.
ACTIVITY_ATTEMPTS = "SELECT * FROM all_attempts WHERE id > $1 ORDER BY id LIMIT $2"
ACTIVITY_RUNS_BY_ID = "SELECT * FROM all_runs WHERE id = ANY($1::bigint[])"
ACTIVITY_LATEST = "SELECT coalesce(max(id), 0) FROM all_attempts"
ACTIVITY_RUNNING = (
    "SELECT * FROM runs WHERE state = 'running' ORDER BY lease_expires_at, id LIMIT $1"
)
ACTIVITY_CLOSED = """
SELECT * FROM all_runs r
WHERE finished_at >= $1 AND NOT EXISTS (
    SELECT 1 FROM all_attempts a
    WHERE a.run_id = r.id AND a.attempt = r.attempt AND a.finished_at = r.finished_at)
ORDER BY finished_at, id LIMIT $2"""
ACTIVITY_WAITING = """
SELECT * FROM runs WHERE id IN (
    SELECT min(id) FROM runs WHERE state = 'pending' AND available_at <= $1 GROUP BY job_id)
ORDER BY id LIMIT $2"""

LIST_AUDIT = "SELECT * FROM audit_log WHERE tenant_id = $1 AND entity_id = $2 ORDER BY id"

NOTIFY = f"SELECT pg_notify({_CHANNEL.format(t='$1::text')}, '')"

CLOCK = "SELECT clock_timestamp()"


class Select:
    """A filtered SELECT whose text depends on which filters are given.

    One statement per combination, rather than ``($n IS NULL OR col = $n)``: a cursor
    condition stays an index condition even once PostgreSQL switches asyncpg's cached
    statement to a generic plan, so page 1,000 costs what page 1 does.
    """

    def __init__(self, table: str, *conditions: tuple[str, Any]) -> None:
        self.table = table
        self.where: list[str] = []
        self.args: list[Any] = []
        for condition, value in conditions:
            self.add(condition, value)

    def add(self, condition: str, *values: Any) -> None:
        """AND ``condition``, whose ``{}`` placeholders stand for ``values``' parameters,
        in order."""
        first = len(self.args) + 1
        self.args.extend(values)
        self.where.append(condition.format(*(f"${first + i}" for i in range(len(values)))))

    def round_robin(self, partition: str, order_by: tuple[str, ...], limit: int) -> tuple[Any, ...]:
        """Like :meth:`query`, but taking rows from each ``partition`` in turn: the first
        of every tenant, then the second of every tenant…, so one tenant's backlog
        cannot hold a batch to itself. ``order_by`` is columns, ``id`` among them.

        The turns are numbered over the sort columns alone and only the rows chosen are
        read whole: every matching row goes through the sort, and for a herd of 50,000
        due jobs sorting them narrow took half the time of sorting them with every
        column (43 against 90 ms)."""
        columns = ", ".join(order_by)
        chosen = ", ".join(f"due.{column}" for column in order_by)
        text = (
            f"SELECT t.* FROM (SELECT {columns}, row_number() OVER (PARTITION BY"
            f" {partition} ORDER BY {columns}) AS turn FROM {self.table}"
            f" WHERE {' AND '.join(self.where)}"
            f" ORDER BY turn, {columns} LIMIT ${len(self.args) + 1}) AS due"
            f" JOIN {self.table} AS t USING (id) ORDER BY due.turn, {chosen}"
        )
        return (text, *self.args, limit)

    def count(self, limit: int) -> tuple[Any, ...]:
        """How many rows match, counting no further than ``limit`` (the inner LIMIT stops
        the index walk)."""
        text = (
            f"SELECT count(*) FROM (SELECT 1 FROM {self.table}"
            f" WHERE {' AND '.join(self.where)} LIMIT ${len(self.args) + 1}) AS matched"
        )
        return (text, *self.args, limit)

    def query(self, order_by: str, limit: int) -> tuple[Any, ...]:
        """The statement, then its arguments: ``fetch(*select.query(...))``."""
        text = (
            f"SELECT * FROM {self.table} WHERE {' AND '.join(self.where)}"
            f" ORDER BY {order_by} LIMIT ${len(self.args) + 1}"
        )
        return (text, *self.args, limit)


def dead_page(select: Select, limit: int) -> tuple[Any, ...]:
    """A page of the dead-letter queue (``select`` is over ``all_runs r``): each run with its
    job's name and its last attempt's error, read along attempts_run by a lateral join,
    one statement for the page. The page is cut first, then joined: a filter that the
    id order cannot serve (a pool's 20,000 dead runs) sorts bare rows, and only the
    page's rows look up their job and attempt."""
    text = (
        "SELECT r.*, j.name AS job_name, last.error_class AS last_class,"
        " last.error_message AS last_message"
        f" FROM (SELECT * FROM {select.table} WHERE {' AND '.join(select.where)}"
        f" ORDER BY r.id DESC LIMIT ${len(select.args) + 1}) r"
        " LEFT JOIN jobs j ON j.id = r.job_id AND j.tenant_id = r.tenant_id"
        " LEFT JOIN LATERAL (SELECT a.error_class, a.error_message FROM all_attempts a"
        " WHERE a.run_id = r.id ORDER BY a.attempt DESC, a.id DESC LIMIT 1) last ON true"
        " ORDER BY r.id DESC"
    )
    return (text, *select.args, limit)
