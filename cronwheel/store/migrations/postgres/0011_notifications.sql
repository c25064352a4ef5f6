-- cronwheel PostgreSQL schema, step 11: completion notifications
-- (docs/workflows.md#notifications). jobs.notify holds a job's notification targets
-- ([{"on": [...], "url": ...}]), NULL when it has none: the statements that change a
-- run's state probe the batch's distinct jobs for it, and write nothing more for a job
-- without targets. A nullable column without a default: no table rewrite.
-- notifications is the outbox: one row per event and target, written by the statement
-- that changes the run's state, then delivered by the notifier (at least once, with
-- retries) and kept as delivered, or dead after too many failures (its own dead letter,
-- replayable).

ALTER TABLE jobs ADD COLUMN notify jsonb;

CREATE TABLE notifications (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant_id       text NOT NULL,
    event_id        text NOT NULL,
    event           text NOT NULL CHECK (event IN ('succeeded', 'failed', 'dead', 'skipped')),
    job_id          uuid NOT NULL,
    job_name        text NOT NULL,
    run_id          bigint NOT NULL,
    scheduled_for   timestamptz NOT NULL,
    attempt         integer NOT NULL,
    error           text,
    occurred_at     timestamptz NOT NULL,
    target          integer NOT NULL,
    url             text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead')),
    tries           integer NOT NULL DEFAULT 0,
    next_at         timestamptz NOT NULL,
    last_error      text,
    finished_at     timestamptz
);

-- The notifier's claim: pending rows by due time.
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
-- A tenant's notifications by state, newest first (the dead letter's listing).
CREATE INDEX notifications_tenant_state ON notifications (tenant_id, state, id);
-- Retention: finished rows by finish time.
CREATE INDEX notifications_finished ON notifications (finished_at) WHERE state <> 'pending';
