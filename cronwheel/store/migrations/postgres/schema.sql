-- cronwheel PostgreSQL schema, fresh install: the result of every migration, kept in step
-- by tests/store/test_postgres_specific.py.
-- Same tables, columns, constraints and indexes as the SQLite schema, in PostgreSQL
-- types: instants are timestamptz, JSON values jsonb, job ids uuid (time-ordered v7);
-- but jobs.tenant_id and runs.job_id are checked once per statement, not by foreign keys
-- (0003_statement_checks.sql).

CREATE TABLE tenants (
    id                      text PRIMARY KEY,
    name                    text NOT NULL,
    max_jobs                integer,
    max_creates_per_second  double precision,
    created_at              timestamptz NOT NULL,
    create_tokens           double precision,
    create_tokens_at        timestamptz,
    claim_weight            double precision NOT NULL DEFAULT 1
        CHECK (claim_weight > 0 AND claim_weight <= 1000),
    max_running             integer CHECK (max_running > 0)
);

INSERT INTO tenants (id, name, created_at) VALUES ('default', 'default', now());

CREATE TABLE jobs (
    id               uuid PRIMARY KEY,
    tenant_id        text NOT NULL,  -- a tenant's id: checked by CREATE_JOBS (0003)
    name             text NOT NULL,
    schedule         jsonb NOT NULL,
    action           jsonb NOT NULL,
    pool             text NOT NULL,
    payload          jsonb,
    priority         integer NOT NULL CHECK (priority BETWEEN 0 AND 3),
    retry            jsonb NOT NULL,
    timeout_seconds  double precision NOT NULL,
    misfire          jsonb NOT NULL,
    overlap          text NOT NULL,
    jitter_seconds   double precision NOT NULL,
    catchup_seconds  double precision NOT NULL,
    delivery         text NOT NULL,
    state            text NOT NULL CHECK (state IN ('active', 'paused', 'completed', 'cancelled')),
    version          integer NOT NULL,
    next_fire_at     timestamptz,
    last_fire_at     timestamptz,
    shard_key        integer NOT NULL,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    traceparent      text,
    notify           jsonb,  -- notification targets (0011); NULL: none
    concurrency      jsonb  -- {"key": template, "limit": n} (0019); NULL: none
);

-- A name is unique among a tenant's live jobs; cancelled ones keep theirs for audit.
CREATE UNIQUE INDEX jobs_tenant_name ON jobs (tenant_id, name) WHERE state <> 'cancelled';
-- The scheduler's tick: active jobs by next_fire_at.
CREATE INDEX jobs_due ON jobs (next_fire_at) WHERE state = 'active';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id);
-- Listing sorted by name or by next fire time (0010): names in byte order, like
-- SQLite's BINARY; a job that will not fire (not active, or no next fire time) sorts
-- after every instant.
CREATE INDEX jobs_tenant_name_id ON jobs (tenant_id, name COLLATE "C", id);
CREATE INDEX jobs_tenant_next_fire ON jobs (tenant_id, coalesce(CASE WHEN state = 'active' THEN next_fire_at END, 'infinity'::timestamptz), id);
-- Listing filtered by pool, or by a state other than active (0017): a range of its
-- own index in creation order, whatever the number of jobs.
CREATE INDEX jobs_tenant_pool_id ON jobs (tenant_id, pool, id);
CREATE INDEX jobs_tenant_state_id ON jobs (tenant_id, state, id) WHERE state <> 'active';

CREATE TABLE runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id         text NOT NULL,
    job_id            uuid NOT NULL,  -- a job's id: checked where runs are inserted (0003)
    scheduled_for     timestamptz NOT NULL,
    available_at      timestamptz NOT NULL,
    state             text NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'dead', 'cancelled', 'skipped')),
    pool              text NOT NULL,
    priority          integer NOT NULL CHECK (priority BETWEEN 0 AND 3),
    attempt           integer NOT NULL DEFAULT 0,
    max_attempts      integer NOT NULL,
    fence             integer NOT NULL DEFAULT 0,
    job_version       integer NOT NULL,
    overlap           text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'queue', 'replace')),
    lease_owner       text,
    lease_expires_at  timestamptz,
    cancel_requested  boolean NOT NULL DEFAULT false,
    reason            text,
    last_error        text,
    created_at        timestamptz NOT NULL,
    started_at        timestamptz,
    finished_at       timestamptz,
    payload           jsonb,  -- an enqueued run's own payload (0004); NULL: the job's
    progress          double precision,  -- the last progress report and checkpoint (0009)
    progress_message  text,
    progress_at       timestamptz,
    checkpoint        jsonb,
    checkpoint_at     timestamptz,
    pipeline_run_id   uuid,  -- a pipeline task's (0013); NULL: not a task
    task              text,
    task_spec         jsonb,
    inputs            jsonb,
    result            jsonb,
    concurrency_key   text,  -- the rendered concurrency key and its limit (0019)
    concurrency_limit integer CHECK (concurrency_limit > 0)
);

-- I2: one run per occurrence. Scanned backwards it also lists a job's runs by
-- scheduled_for descending.
CREATE UNIQUE INDEX runs_job_scheduled_for ON runs (job_id, scheduled_for);
-- The worker's claim: pending runs by pool, priority, then due time.
CREATE INDEX runs_claimable ON runs (pool, priority, available_at) WHERE state = 'pending';
-- Claims fair across tenants: each tenant's pending runs by priority then due time (0016),
-- those without a concurrency key (0019).
CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at) WHERE state = 'pending' AND concurrency_key IS NULL;
-- Concurrency keys (0019): pending keyed runs by key, for the claim's loose index scan;
-- running keyed runs by key, for the count of what a key has running.
CREATE INDEX runs_keyed ON runs (pool, tenant_id, concurrency_key, priority, available_at)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
CREATE INDEX runs_keyed_running ON runs (tenant_id, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
-- Many tenants, whatever ANALYZE saw: a tenant's slice is read through runs_fair (0016).
ALTER TABLE runs ALTER COLUMN tenant_id SET (n_distinct = 100);
-- Claims apply overlap policies to the few runs that have one.
CREATE INDEX runs_overlap ON runs (pool, available_at) WHERE state = 'pending' AND overlap <> 'allow';
-- Overlap checks: a job's running runs.
CREATE INDEX runs_running_by_job ON runs (job_id) WHERE state = 'running';
-- The rescuer: running runs by lease expiry.
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state = 'running';
-- Retention: finished runs by age.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
-- A job's last outcome: its newest finished run (0005).
CREATE INDEX runs_job_finished ON runs (job_id, finished_at, id) WHERE finished_at IS NOT NULL;
-- Tenant-wide listings (the dead-letter queue) newest first.
CREATE INDEX runs_tenant_state ON runs (tenant_id, state, id);
CREATE INDEX runs_dead ON runs (tenant_id, pool) WHERE state = 'dead';

CREATE TABLE attempts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id      text NOT NULL,
    run_id         bigint NOT NULL,  -- its run's id: no foreign key, see 0024
    job_id         uuid NOT NULL,
    attempt        integer NOT NULL,
    worker_id      text,
    fence          integer NOT NULL,
    started_at     timestamptz,
    finished_at    timestamptz NOT NULL,
    lag_seconds    double precision,
    outcome        text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'permanent', 'timed_out', 'cancelled', 'lost')),
    error_class    text,
    error_message  text,
    http_status    integer  -- what a webhook target answered (0008)
);

CREATE INDEX attempts_run ON attempts (run_id, attempt);
CREATE INDEX attempts_finished ON attempts (finished_at);

CREATE TABLE audit_log (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id  text NOT NULL,
    entity     text NOT NULL,
    entity_id  text NOT NULL,
    action     text NOT NULL,
    actor      text NOT NULL,
    at         timestamptz NOT NULL,
    details    jsonb
);

CREATE INDEX audit_log_entity ON audit_log (tenant_id, entity_id, id);

-- cronwheel PostgreSQL schema, step 2: what the cluster and the API coordinate through.

-- Scheduler shards: one holder at a time; the epoch grows on every change of holder and
-- guards the holder's writes.
CREATE TABLE shard_leases (
    shard       integer PRIMARY KEY,
    holder      text,
    epoch       bigint NOT NULL DEFAULT 0,
    expires_at  timestamptz
);

CREATE TABLE workers (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL,
    host          text NOT NULL,
    pools         jsonb NOT NULL,
    capacity      integer NOT NULL,
    in_flight     integer NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    brokers       jsonb NOT NULL DEFAULT '{}',
    commands      jsonb NOT NULL DEFAULT '[]'  -- the executables it may run (0023)
);

CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- API keys are stored as a SHA-256 of the secret, never the secret itself.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    key_hash    text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('admin', 'write', 'read', 'worker')),
    name        text,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- The API's Idempotency-Key header: same key and body → the stored response.
CREATE TABLE idempotency_keys (
    tenant_id     text NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    status        integer NOT NULL,
    response      jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- Raises what the dropped foreign key raised (SQLSTATE 23503, its constraint's name, its
-- detail), so that callers tell a missing tenant from a missing job as before.
CREATE FUNCTION cronwheel_not_present(constraint_name text, col text, val text, tbl text)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'insert violates the check of "%"', constraint_name
        USING ERRCODE = 'foreign_key_violation', CONSTRAINT = constraint_name,
              DETAIL = format('Key (%s)=(%s) is not present in table "%s".', col, val, tbl);
END
$$;

-- The notifications outbox (0011): one row per event and target.
CREATE TABLE notifications (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    event_id        text NOT NULL,
    event           text NOT NULL CHECK (event IN ('succeeded', 'failed', 'dead', 'skipped', 'pipeline_succeeded', 'pipeline_failed', 'pipeline_cancelled')),
    job_id          uuid NOT NULL,
    job_name        text NOT NULL,
    run_id          bigint NOT NULL,
    scheduled_for   timestamptz NOT NULL,
    attempt         integer NOT NULL,
    error           text,
    occurred_at     timestamptz NOT NULL,
    target          integer NOT NULL,
    url             text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    tries           integer NOT NULL DEFAULT 0,
    next_at         timestamptz NOT NULL,
    last_error      text,
    finished_at     timestamptz,
    pipeline_run_id uuid  -- a pipeline event's (0013)
);

-- The notifier's claim: pending rows by due time.
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
-- A tenant's notifications by state, newest first (the dead letter's listing).
CREATE INDEX notifications_tenant_state ON notifications (tenant_id, state, id);
-- Retention: finished rows by finish time.
CREATE INDEX notifications_finished ON notifications (finished_at) WHERE state <> 'pending';

-- Pipeline definitions, versioned (0012, decision 0025): each change of a definition adds
-- an immutable pipeline_versions row; the pipeline's version names its latest.
CREATE TABLE pipelines (
    id          uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    name        text NOT NULL,
    version     integer NOT NULL,
    state       text NOT NULL CHECK (state IN ('active', 'deleted')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- A name is unique among a tenant's live pipelines; deleted ones keep theirs for audit.
CREATE UNIQUE INDEX pipelines_tenant_name ON pipelines (tenant_id, name) WHERE state <> 'deleted';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX pipelines_tenant_id ON pipelines (tenant_id, id);

CREATE TABLE pipeline_versions (
    pipeline_id  uuid NOT NULL REFERENCES pipelines (id),
    version      integer NOT NULL,
    definition   jsonb NOT NULL,
    fingerprint  text NOT NULL,
    created_at   timestamptz NOT NULL,
    actor        text NOT NULL,
    PRIMARY KEY (pipeline_id, version)
);

-- Pipeline runs (0013, decision 0025): a row per task instance started or skipped,
-- keyed so that a task starts once per pipeline run.
CREATE INDEX runs_pipeline_run ON runs (pipeline_run_id) WHERE pipeline_run_id IS NOT NULL;

CREATE TABLE pipeline_runs (
    id                uuid PRIMARY KEY,
    tenant_id         text NOT NULL,
    pipeline_id       uuid NOT NULL,
    version           integer NOT NULL,
    job_id            uuid NOT NULL,
    state             text NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    cancel_requested  boolean NOT NULL DEFAULT false,
    trigger_run_id    bigint UNIQUE,  -- the job run that started it (NULL: the API did)
    actor             text NOT NULL,
    created_at        timestamptz NOT NULL,
    finished_at       timestamptz
);
CREATE INDEX pipeline_runs_tenant ON pipeline_runs (tenant_id, id);
CREATE INDEX pipeline_runs_pipeline ON pipeline_runs (pipeline_id, id);
-- Retention: finished pipeline runs by finish time.
CREATE INDEX pipeline_runs_finished ON pipeline_runs (finished_at) WHERE finished_at IS NOT NULL;
-- A job's unfinished pipeline runs: its overlap policy holds its next run behind them
-- (0021, decision 0044).
CREATE INDEX pipeline_runs_running_by_job ON pipeline_runs (job_id) WHERE state = 'running';

CREATE TABLE pipeline_tasks (
    pipeline_run_id  uuid NOT NULL,
    task             text NOT NULL,
    instance         integer NOT NULL,
    state            text NOT NULL CHECK (state IN ('started', 'succeeded', 'dead', 'cancelled', 'skipped')),
    run_id           bigint,  -- NULL: skipped (or a fan-out that could not expand)
    reason           text,
    message          text,
    updated_at       timestamptz NOT NULL,
    PRIMARY KEY (pipeline_run_id, task, instance)
);
-- The reconciler's work: tasks whose run may have ended by another path than a worker's
-- completion (a rescue, a cancel).
CREATE INDEX pipeline_tasks_started ON pipeline_tasks (run_id) WHERE state = 'started';

-- The audit log by tenant, newest first (0015): GET /v1/audit.
CREATE INDEX audit_log_tenant_id ON audit_log (tenant_id, id);

-- max_running, cluster-wide (0016): the room each capped tenant has left, counted after
-- one advisory lock, with a fresh snapshot (a VOLATILE function): claims of capped tenants
-- queue, and never both fill the same room.
CREATE FUNCTION cronwheel_claim_rooms(tenants text[], caps integer[])
RETURNS TABLE (out_tenant text, out_room integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(cardinality(tenants), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('cronwheel.max_running'));
    RETURN QUERY
        SELECT t.id, greatest(0, t.cap - (
            SELECT count(*) FROM runs AS r WHERE r.tenant_id = t.id AND r.state = 'running'
        ))::integer
        FROM unnest(tenants, caps) AS t(id, cap);
END
$$;

-- Per-pool rate limits (0018, decision 0033): a token bucket per limited pool.
CREATE TABLE pool_rates (
    pool         text PRIMARY KEY,
    per_second   double precision NOT NULL CHECK (per_second > 0 AND per_second <= 1000000),
    tokens       double precision NOT NULL,
    refilled_at  timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);

-- Concurrency keys (0019): the room each key has left, counted by the claim that uses it. One advisory lock (held
-- to the end of the claim's transaction) puts the claims that meet keyed runs in a line,
-- and the count, in a VOLATILE function, is taken after the lock with a fresh snapshot:
-- it sees every run the previous claim started, so two workers never both fill the same
-- key's room. A key's limit is the smallest of its next pending run's and its running
-- runs' (jobs naming the same key with different limits: the strictest holds). Claims
-- that meet no keyed run call it with empty arrays: no lock, no count.
CREATE FUNCTION cronwheel_claim_key_rooms(tenants text[], keys text[], limits integer[])
RETURNS TABLE (out_tenant text, out_key text, out_room integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(cardinality(tenants), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('cronwheel.concurrency'));
    RETURN QUERY
        SELECT t.id, t.k, greatest(0, least(t.lim, coalesce(r.lim, t.lim)) - r.n)::integer
        FROM unnest(tenants, keys, limits) AS t(id, k, lim)
        CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(x.concurrency_limit) AS lim FROM runs AS x
            WHERE x.tenant_id = t.id AND x.concurrency_key = t.k AND x.state = 'running'
        ) AS r;
END
$$;
-- Finished runs and their attempts, archived into tables partitioned by the run's finish
-- time (0020, decision 0032).
-- runs and attempts keep what is live and what finished moments ago; maintenance
-- (archive_runs) moves a finished run and its attempts here after a short settle time,
-- in one statement, and retention drops whole partitions. Maintenance creates the
-- partitions ahead of time; the DEFAULT partitions hold only what finished before the
-- first partition (an upgrade's backlog), and retention deletes those by rows.
-- Same columns as runs and attempts, in the same order (LIKE): a migration that adds a
-- column to runs or attempts adds it here too and recreates the views below.
-- No foreign keys: an attempt and its run are moved, and dropped, together.
CREATE TABLE run_history (LIKE runs) PARTITION BY RANGE (finished_at);
ALTER TABLE run_history ALTER COLUMN finished_at SET NOT NULL;
-- attempt_history carries its run's finish time as its partition key: a run and its
-- attempts live in partitions of the same bounds, and are dropped together.
CREATE TABLE attempt_history (LIKE attempts, run_finished_at timestamptz NOT NULL)
    PARTITION BY RANGE (run_finished_at);
CREATE TABLE run_history_default PARTITION OF run_history DEFAULT;
CREATE TABLE attempt_history_default PARTITION OF attempt_history DEFAULT;

-- The reads of history, per partition: a run by id; a tenant's runs newest first (by
-- state: the dead-letter queue); a job's runs by occurrence (its runs list, backfill's
-- insert-if-absent, the runs around an instant) and by finish (its last outcome); a
-- pipeline run's tasks; the dead-letter count; a run's attempts, the activity feed by
-- attempt id, and the status page's attempts by finish time.
CREATE INDEX run_history_id ON run_history (id);
CREATE INDEX run_history_tenant_id ON run_history (tenant_id, id);
CREATE INDEX run_history_tenant_state ON run_history (tenant_id, state, id);
CREATE INDEX run_history_job_scheduled_for ON run_history (job_id, scheduled_for);
CREATE INDEX run_history_job_finished ON run_history (job_id, finished_at, id);
CREATE INDEX run_history_pipeline_run ON run_history (pipeline_run_id) WHERE pipeline_run_id IS NOT NULL;
CREATE INDEX run_history_dead ON run_history (tenant_id, pool) WHERE state = 'dead';
CREATE INDEX attempt_history_run ON attempt_history (run_id, attempt);
CREATE INDEX attempt_history_id ON attempt_history (id);
CREATE INDEX attempt_history_finished ON attempt_history (finished_at);

-- Every run and every attempt, live or archived: what the reads that may concern a
-- finished run select from. A run is in exactly one of the two tables in any snapshot
-- (the move is one statement), and ORDER BY ... LIMIT over the union merges the index
-- scans of both sides.
CREATE VIEW all_runs AS
    SELECT * FROM runs
    UNION ALL
    SELECT * FROM run_history;
-- A command's exit and output tails (0023), added after history's run_finished_at as
-- the step added them: history is written and read by column name.
ALTER TABLE attempts ADD COLUMN output text;
ALTER TABLE attempt_history ADD COLUMN output text;
CREATE VIEW all_attempts AS
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status, output
    FROM attempts
    UNION ALL
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status, output
    FROM attempt_history;

-- runs now holds minutes of work, and every run leaves it by a delete: vacuum it after
-- 1% of its rows are dead (at least 1,000) rather than the default 20%, and without the
-- cost delay, so that its pages are reused before the table and its indexes grow.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                      autovacuum_vacuum_cost_delay = 0);
ALTER TABLE attempts SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                          autovacuum_vacuum_cost_delay = 0);
