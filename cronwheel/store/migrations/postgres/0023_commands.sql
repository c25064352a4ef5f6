-- cronwheel PostgreSQL schema, step 23: command actions (issue 30 item 1, decision 0048).
-- An attempt keeps what a command left: its exit and the tails of its stdout and stderr
-- (JSON text, at most 64 KiB a stream), NULL for every other action; and a worker
-- announces which executables its operator allows it to run, so that the API can refuse
-- a command job that no live worker of its pool would run. Nullable or defaulted columns:
-- no table rewrite. attempt_history gets the column too (after run_finished_at: history
-- is written and read by column name), and all_attempts is made again with it.
ALTER TABLE attempts ADD COLUMN output text;
ALTER TABLE attempt_history ADD COLUMN output text;
ALTER TABLE workers ADD COLUMN commands jsonb NOT NULL DEFAULT '[]';

DROP VIEW all_attempts;
CREATE VIEW all_attempts AS
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status, output
    FROM attempts
    UNION ALL
    SELECT id, tenant_id, run_id, job_id, attempt, worker_id, fence, started_at, finished_at,
           lag_seconds, outcome, error_class, error_message, http_status, output
    FROM attempt_history;
