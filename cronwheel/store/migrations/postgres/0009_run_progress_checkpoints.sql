-- cronwheel PostgreSQL schema, step 9: a run's last progress report and last
-- checkpoint, written by its worker (fenced, with the heartbeat or the completion). The
-- checkpoint is kept across attempts (retries, rescues, replays) so that the next attempt
-- resumes from it; the progress is the last one any attempt reported. NULL: none
-- reported. Nullable columns without defaults: no table rewrite.

ALTER TABLE runs ADD COLUMN progress double precision;
ALTER TABLE runs ADD COLUMN progress_message text;
ALTER TABLE runs ADD COLUMN progress_at timestamptz;
ALTER TABLE runs ADD COLUMN checkpoint jsonb;
ALTER TABLE runs ADD COLUMN checkpoint_at timestamptz;
