-- cronwheel PostgreSQL schema, step 5: truthful outcomes (docs/decisions/0012-idempotent-control-and-last-outcome.md).
-- An attempt that failed for good (a PermanentError, a webhook's 4xx) says so: outcome
-- 'permanent'. A job's last outcome is its newest finished run, found through an index of
-- finished runs by job, so reading it costs one index probe per job and no write path
-- changes (a run enters the index when it finishes, as it enters runs_finished).

ALTER TABLE attempts DROP CONSTRAINT attempts_outcome_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_outcome_check
    CHECK (outcome IN ('succeeded', 'failed', 'permanent', 'timed_out', 'cancelled', 'lost'));

CREATE INDEX runs_job_finished ON runs (job_id, finished_at, id) WHERE finished_at IS NOT NULL;
