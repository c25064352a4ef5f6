-- cronwheel SQLite schema, step 9: a run's last progress report and last checkpoint,
-- written by its worker (fenced, with the heartbeat or the completion). The checkpoint
-- is kept across attempts (retries, rescues, replays) so that the next attempt resumes
-- from it; the progress is the last one any attempt reported. NULL: none reported.

ALTER TABLE runs ADD COLUMN progress REAL;
ALTER TABLE runs ADD COLUMN progress_message TEXT;
ALTER TABLE runs ADD COLUMN progress_at INTEGER;
ALTER TABLE runs ADD COLUMN checkpoint TEXT;
ALTER TABLE runs ADD COLUMN checkpoint_at INTEGER;
