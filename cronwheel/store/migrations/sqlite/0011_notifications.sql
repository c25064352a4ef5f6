-- cronwheel SQLite schema, step 11: completion notifications (docs/workflows.md#notifications).
-- jobs.notify holds a job's notification targets as JSON ([{"on": [...], "url": ...}]),
-- NULL when it has none: the statements that change a run's state look a batch's jobs up
-- only for that, and write nothing more for a job without targets.
-- notifications is the outbox: one row per event and target, written in the transaction
-- of the state change that caused it, then delivered by the notifier (at least once,
-- with retries) and kept as delivered, or dead after too many failures (its own dead
-- letter, replayable).

ALTER TABLE jobs ADD COLUMN notify TEXT;

CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event           TEXT NOT NULL CHECK (event IN ('succeeded', 'failed', 'dead', 'skipped')),
    job_id          TEXT NOT NULL,
    job_name        TEXT NOT NULL,
    run_id          INTEGER NOT NULL,
    scheduled_for   INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    error           TEXT,
    occurred_at     INTEGER NOT NULL,
    target          INTEGER NOT NULL,
    url             TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    tries           INTEGER NOT NULL DEFAULT 0,
    next_at         INTEGER NOT NULL,
    last_error      TEXT,
    finished_at     INTEGER
);

-- The notifier's claim: pending rows by due time.
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
-- A tenant's notifications by state, newest first (the dead letter's listing).
CREATE INDEX notifications_tenant_state ON notifications (tenant_id, state, id);
-- Retention: finished rows by finish time.
CREATE INDEX notifications_finished ON notifications (finished_at) WHERE state <> 'pending';
