-- cronwheel SQLite schema, step 4: a run may carry its own payload, given when it was
-- enqueued to a manual job (docs/decisions/0008); NULL means the job's payload.

ALTER TABLE runs ADD COLUMN payload TEXT;
