-- cronwheel SQLite schema, step 3: nothing to change. On PostgreSQL this step replaces
-- the per-row foreign-key triggers of jobs.tenant_id and runs.job_id by checks once per
-- statement (docs/decisions/0007); SQLite's foreign keys are an index probe per row in
-- the same process, and stay.
SELECT 1;
