-- cronwheel SQLite schema, step 13: pipeline runs (decision 0025). A pipeline run
-- keeps the version it started with. Each task instance that started or was skipped has
-- a pipeline_tasks row keyed by (pipeline run, task, instance): the key that makes a task
-- start once per pipeline run. A task's run is an ordinary run of the pipeline run's job
-- that carries its task's action and policies, its inputs, and (any run) its result.

ALTER TABLE runs ADD COLUMN pipeline_run_id TEXT;  -- NULL: not a pipeline task
ALTER TABLE runs ADD COLUMN task TEXT;
ALTER TABLE runs ADD COLUMN task_spec TEXT;  -- the task's action, retry and timeout
ALTER TABLE runs ADD COLUMN inputs TEXT;     -- its upstream tasks' results
ALTER TABLE runs ADD COLUMN result TEXT;     -- what its handler returned (0013)
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

-- A pipeline run's ending is an event of the outbox too (a pipeline's notify targets):
-- the row names its pipeline run, and its run_id is the pipeline run's last task run.
-- SQLite cannot change a CHECK in place: the table is copied into one that allows them.
CREATE TABLE notifications_0013 (
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

INSERT INTO notifications_0013 SELECT *, NULL FROM notifications;
DROP TABLE notifications;
ALTER TABLE notifications_0013 RENAME TO notifications;
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_tenant_state ON notifications (tenant_id, state, id);
CREATE INDEX notifications_finished ON notifications (finished_at) WHERE state <> 'pending';
