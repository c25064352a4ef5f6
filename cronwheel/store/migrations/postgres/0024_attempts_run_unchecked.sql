-- cronwheel PostgreSQL schema, step 24: an attempt's run is no longer a foreign key
-- (issue 28, decision 0035's addendum). Every completion inserts an attempt row, and the
-- key's check (a probe of runs and a row lock per attempt) was 2.7-5 us of a run's
-- 21-26 us completion (bench/README.md, "Issue 28 store steps"). Attempts are inserted only by the statements that move their run
-- (completion, rescue, release: from the row they just updated, under its lock) and by
-- a restore from history (with their run, in one statement); runs are deleted only with
-- their attempts (the archive, retention's DELETE_HISTORY), so the cascade had nothing
-- left to do.
ALTER TABLE attempts DROP CONSTRAINT attempts_run_id_fkey;
