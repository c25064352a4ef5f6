-- cronwheel SQLite schema, step 23: command actions (issue 30 item 1, decision 0048).
-- An attempt keeps what a command left: its exit and the tails of its stdout and stderr
-- (JSON text, at most 64 KiB a stream), NULL for every other action; and a worker
-- announces which executables its operator allows it to run, so that the API can refuse
-- a command job that no live worker of its pool would run.
ALTER TABLE attempts ADD COLUMN output TEXT;
ALTER TABLE workers ADD COLUMN commands TEXT NOT NULL DEFAULT '[]';
