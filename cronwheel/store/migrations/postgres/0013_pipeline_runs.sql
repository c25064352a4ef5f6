-- cronwheel PostgreSQL schema, step 13: pipeline runs (decision 0025). A pipeline run
-- keeps the version it started with. Each task instance that started or was skipped has
-- a pipeline_tasks row keyed by (pipeline run, task, instance): the key that makes a task
-- start once per pipeline run. A task's run is an ordinary run of the pipeline run's job
-- that carries its task's action and policies, its inputs, and (any run) its result.

ALTER TABLE runs ADD COLUMN pipeline_run_id uuid;  -- NULL: not a pipeline task
ALTER TABLE runs ADD COLUMN task text;
ALTER TABLE runs ADD COLUMN task_spec jsonb;  -- the task's action, retry and timeout
ALTER TABLE runs ADD COLUMN inputs jsonb;     -- its upstream tasks' results
ALTER TABLE runs ADD COLUMN result jsonb;     -- what its handler returned (0013)
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

-- A pipeline run's ending is an event of the outbox too (a pipeline's notify targets):
-- the row names its pipeline run, and its run_id is the pipeline run's last task run.
ALTER TABLE notifications ADD COLUMN pipeline_run_id uuid;
ALTER TABLE notifications DROP CONSTRAINT notifications_event_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_event_check
    CHECK (event IN ('succeeded', 'failed', 'dead', 'skipped', 'pipeline_succeeded', 'pipeline_failed', 'pipeline_cancelled'));
