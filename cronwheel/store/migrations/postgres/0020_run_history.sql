-- cronwheel PostgreSQL schema, step 20: finished runs and their attempts archived into
-- tables partitioned by the run's finish time (issue 18 item 4, decision 0032).
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
CREATE VIEW all_attempts AS
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status
    FROM attempts
    UNION ALL
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status
    FROM attempt_history;

-- runs now holds minutes of work, and every run leaves it by a delete: vacuum it after
-- 1% of its rows are dead (at least 1,000) rather than the default 20%, and without the
-- cost delay, so that its pages are reused before the table and its indexes grow.
ALTER TABLE runs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                      autovacuum_vacuum_cost_delay = 0);
ALTER TABLE attempts SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                          autovacuum_vacuum_cost_delay = 0);
