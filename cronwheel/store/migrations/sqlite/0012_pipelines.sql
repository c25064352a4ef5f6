-- cronwheel SQLite schema, step 12: pipeline definitions, versioned (decision 0025).
-- A pipeline row is the named thing a tenant edits; each change of its definition adds
-- an immutable row to pipeline_versions, and the pipeline's version names its latest.
-- A pipeline run (later work) keeps the version it started with.

CREATE TABLE pipelines (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('active', 'deleted')),
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- A name is unique among a tenant's live pipelines; deleted ones keep theirs for audit.
CREATE UNIQUE INDEX pipelines_tenant_name ON pipelines (tenant_id, name) WHERE state <> 'deleted';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX pipelines_tenant_id ON pipelines (tenant_id, id);

CREATE TABLE pipeline_versions (
    pipeline_id  TEXT NOT NULL REFERENCES pipelines (id),
    version      INTEGER NOT NULL,
    definition   TEXT NOT NULL,
    fingerprint  TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    actor        TEXT NOT NULL,
    PRIMARY KEY (pipeline_id, version)
);
