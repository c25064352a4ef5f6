-- cronwheel SQLite schema, fresh install: the result of every migration, kept in step by tests/store/test_migrations.py.
-- Instants are INTEGER microseconds since the Unix epoch, UTC: exact, and compared fast.
-- JSON values are TEXT.

CREATE TABLE tenants (
    id                      TEXT PRIMARY KEY,
    name                    TEXT NOT NULL,
    max_jobs                INTEGER,
    max_creates_per_second  REAL,
    created_at              INTEGER NOT NULL,
    create_tokens           REAL,
    create_tokens_at        INTEGER,
    claim_weight            REAL NOT NULL DEFAULT 1
        CHECK (claim_weight > 0 AND claim_weight <= 1000),
    max_running             INTEGER CHECK (max_running > 0)
);

INSERT INTO tenants (id, name, created_at)
VALUES ('default', 'default', CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));

CREATE TABLE jobs (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants (id),
    name             TEXT NOT NULL,
    schedule         TEXT NOT NULL,
    action           TEXT NOT NULL,
    pool             TEXT NOT NULL,
    payload          TEXT,
    priority         INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 3),
    retry            TEXT NOT NULL,
    timeout_seconds  REAL NOT NULL,
    misfire          TEXT NOT NULL,
    overlap          TEXT NOT NULL,
    jitter_seconds   REAL NOT NULL,
    catchup_seconds  REAL NOT NULL,
    delivery         TEXT NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('active', 'paused', 'completed', 'cancelled')),
    version          INTEGER NOT NULL,
    next_fire_at     INTEGER,
    last_fire_at     INTEGER,
    shard_key        INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    traceparent      TEXT,
    -- What the jobs list's next-fire order sorts by (0010): after every instant for a job
    -- that will not fire. Computed when read; only its index stores it.
    next_fire_sort   INTEGER GENERATED ALWAYS AS (ifnull(CASE WHEN state = 'active' THEN next_fire_at END, 9223372036854775807)) VIRTUAL,
    notify           TEXT,  -- notification targets as JSON (0011); NULL: none
    concurrency      TEXT  -- {"key": template, "limit": n} (0019); NULL: none
);

-- A name is unique among a tenant's live jobs; cancelled ones keep theirs for audit.
CREATE UNIQUE INDEX jobs_tenant_name ON jobs (tenant_id, name) WHERE state <> 'cancelled';
-- The scheduler's tick: active jobs by next_fire_at.
CREATE INDEX jobs_due ON jobs (next_fire_at) WHERE state = 'active';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id);
-- Listing sorted by name or by next fire time (0010): names compare as bytes, like
-- PostgreSQL's COLLATE "C".
CREATE INDEX jobs_tenant_name_id ON jobs (tenant_id, name, id);
CREATE INDEX jobs_tenant_next_fire ON jobs (tenant_id, next_fire_sort, id);
-- Listing filtered by pool, or by a state other than active (0017): a range of its
-- own index in creation order, whatever the number of jobs.
CREATE INDEX jobs_tenant_pool_id ON jobs (tenant_id, pool, id);
CREATE INDEX jobs_tenant_state_id ON jobs (tenant_id, state, id) WHERE state <> 'active';

CREATE TABLE runs (
    id                INTEGER PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    job_id            TEXT NOT NULL REFERENCES jobs (id),
    scheduled_for     INTEGER NOT NULL,
    available_at      INTEGER NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('pending', 'running', 'succeeded', 'dead', 'cancelled', 'skipped')),
    pool              TEXT NOT NULL,
    priority          INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 3),
    attempt           INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL,
    fence             INTEGER NOT NULL DEFAULT 0,
    job_version       INTEGER NOT NULL,
    overlap           TEXT NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'queue', 'replace')),
    lease_owner       TEXT,
    lease_expires_at  INTEGER,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    reason            TEXT,
    last_error        TEXT,
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,
    finished_at       INTEGER,
    payload           TEXT,  -- an enqueued run's own payload (0004); NULL: the job's
    progress          REAL,  -- the last progress report and checkpoint (0009)
    progress_message  TEXT,
    progress_at       INTEGER,
    checkpoint        TEXT,
    checkpoint_at     INTEGER,
    pipeline_run_id   TEXT,  -- a pipeline task's (0013); NULL: not a task
    task              TEXT,
    task_spec         TEXT,
    inputs            TEXT,
    result            TEXT,
    concurrency_key   TEXT,  -- the rendered concurrency key and its limit (0019)
    concurrency_limit INTEGER CHECK (concurrency_limit > 0)
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
    id             INTEGER PRIMARY KEY,
    tenant_id      TEXT NOT NULL,
    run_id         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    job_id         TEXT NOT NULL,
    attempt        INTEGER NOT NULL,
    worker_id      TEXT,
    fence          INTEGER NOT NULL,
    started_at     INTEGER,
    finished_at    INTEGER NOT NULL,
    lag_seconds    REAL,
    outcome        TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'permanent', 'timed_out', 'cancelled', 'lost')),
    error_class    TEXT,
    error_message  TEXT,
    http_status    INTEGER, -- what a webhook target answered (0008)
    output         TEXT     -- a command's exit and output tails, JSON (0023)
);

CREATE INDEX attempts_run ON attempts (run_id, attempt);
CREATE INDEX attempts_finished ON attempts (finished_at);

CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    tenant_id  TEXT NOT NULL,
    entity     TEXT NOT NULL,
    entity_id  TEXT NOT NULL,
    action     TEXT NOT NULL,
    actor      TEXT NOT NULL,
    at         INTEGER NOT NULL,
    details    TEXT
);

CREATE INDEX audit_log_entity ON audit_log (tenant_id, entity_id, id);

-- cronwheel SQLite schema, step 2: what the cluster and the API coordinate through.

-- Scheduler shards: one holder at a time; the epoch grows on every change of holder and
-- guards the holder's writes.
CREATE TABLE shard_leases (
    shard       INTEGER PRIMARY KEY,
    holder      TEXT,
    epoch       INTEGER NOT NULL DEFAULT 0,
    expires_at  INTEGER
);

CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    host          TEXT NOT NULL,
    pools         TEXT NOT NULL,
    capacity      INTEGER NOT NULL,
    in_flight     INTEGER NOT NULL DEFAULT 0,
    started_at    INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL,
    brokers       TEXT NOT NULL DEFAULT '{}',
    commands      TEXT NOT NULL DEFAULT '[]' -- the executables it may run (0023)
);

CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- API keys are stored as a SHA-256 of the secret, never the secret itself.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    key_hash    TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'write', 'read', 'worker')),
    name        TEXT,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

-- The API's Idempotency-Key header: same key and body → the stored response.
CREATE TABLE idempotency_keys (
    tenant_id     TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    status        INTEGER NOT NULL,
    response      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

-- The notifications outbox (0011): one row per event and target.
CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event           TEXT NOT NULL CHECK (event IN ('succeeded', 'failed', 'dead', 'skipped', 'pipeline_succeeded', 'pipeline_failed', 'pipeline_cancelled')),
    job_id          TEXT NOT NULL,
    job_name        TEXT NOT NULL,
    run_id          INTEGER NOT NULL,
    scheduled_for   INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    error           TEXT,
    occurred_at     INTEGER NOT NULL,
    target          INTEGER NOT NULL,
    url             TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    tries           INTEGER NOT NULL DEFAULT 0,
    next_at         INTEGER NOT NULL,
    last_error      TEXT,
    finished_at     INTEGER,
    pipeline_run_id TEXT  -- a pipeline event's (0013)
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
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('active', 'deleted')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- A name is unique among a tenant's live pipelines; deleted ones keep theirs for audit.
CREATE UNIQUE INDEX pipelines_tenant_name ON pipelines (tenant_id, name) WHERE state <> 'deleted';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX pipelines_tenant_id ON pipelines (tenant_id, id);

CREATE TABLE pipeline_versions (
    pipeline_id  TEXT NOT NULL REFERENCES pipelines (id),
    version      INTEGER NOT NULL,
    definition   TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    actor        TEXT NOT NULL,
    PRIMARY KEY (pipeline_id, version)
);

-- Pipeline runs (0013, decision 0025): a row per task instance started or skipped,
-- keyed so that a task starts once per pipeline run.
CREATE INDEX runs_pipeline_run ON runs (pipeline_run_id) WHERE pipeline_run_id IS NOT NULL;

CREATE TABLE pipeline_runs (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL,
    pipeline_id       TEXT NOT NULL,
    version           INTEGER NOT NULL,
    job_id            TEXT NOT NULL,
    state             TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    trigger_run_id    INTEGER UNIQUE,  -- the job run that started it (NULL: the API did)
    actor             TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    finished_at       INTEGER
);
CREATE INDEX pipeline_runs_tenant ON pipeline_runs (tenant_id, id);
CREATE INDEX pipeline_runs_pipeline ON pipeline_runs (pipeline_id, id);
-- Retention: finished pipeline runs by finish time.
CREATE INDEX pipeline_runs_finished ON pipeline_runs (finished_at) WHERE finished_at IS NOT NULL;
-- A job's unfinished pipeline runs: its overlap policy holds its next run behind them
-- (0021, decision 0044).
CREATE INDEX pipeline_runs_running_by_job ON pipeline_runs (job_id) WHERE state = 'running';

CREATE TABLE pipeline_tasks (
    pipeline_run_id  TEXT NOT NULL,
    task             TEXT NOT NULL,
    instance         INTEGER NOT NULL,
    state            TEXT NOT NULL CHECK (state IN ('started', 'succeeded', 'dead', 'cancelled', 'skipped')),
    run_id           INTEGER,  -- NULL: skipped (or a fan-out that could not expand)
    reason           TEXT,
    message          TEXT,
    updated_at       INTEGER NOT NULL,
    PRIMARY KEY (pipeline_run_id, task, instance)
);
-- The reconciler's work: tasks whose run may have ended by another path than a worker's
-- completion (a rescue, a cancel).
CREATE INDEX pipeline_tasks_started ON pipeline_tasks (run_id) WHERE state = 'started';

-- The audit log by tenant, newest first (0015): GET /v1/audit.
CREATE INDEX audit_log_tenant_id ON audit_log (tenant_id, id);

-- Per-pool rate limits (0018, decision 0033): a token bucket per limited pool.
CREATE TABLE pool_rates (
    pool         TEXT PRIMARY KEY,
    per_second   REAL NOT NULL CHECK (per_second > 0 AND per_second <= 1000000),
    tokens       REAL NOT NULL,
    refilled_at  INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
