-- cronwheel PostgreSQL schema, step 3: a job's tenant and a run's job are checked once
-- per statement instead of by a foreign-key trigger per row (docs/decisions/0007).
-- The two triggers were a quarter of a bulk create's server time. Tenants and jobs are
-- never deleted, so a check at insert is the whole guarantee: CREATE_JOBS checks each
-- distinct tenant of its batch and any run whose job it did not insert itself; the
-- scheduler and the job-state writes insert runs only for jobs they hold locked.

ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_id_fkey;
ALTER TABLE runs DROP CONSTRAINT runs_job_id_fkey;

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
