-- cronwheel SQLite schema, step 5: truthful outcomes (docs/decisions/0012-idempotent-control-and-last-outcome.md).
-- An attempt that failed for good (a PermanentError, a webhook's 4xx) says so: outcome
-- 'permanent'. SQLite cannot change a CHECK in place, so the attempts table is copied
-- into one that allows it. A job's last outcome is its newest finished run, found through
-- an index of finished runs by job: one index probe per job on read, no write path changed.

CREATE TABLE attempts_0005 (
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
    error_message  TEXT
);

INSERT INTO attempts_0005 SELECT * FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_0005 RENAME TO attempts;
CREATE INDEX attempts_run ON attempts (run_id, attempt);

CREATE INDEX runs_job_finished ON runs (job_id, finished_at, id) WHERE finished_at IS NOT NULL;
