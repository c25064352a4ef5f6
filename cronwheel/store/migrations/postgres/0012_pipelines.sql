-- cronwheel PostgreSQL schema, step 12: pipeline definitions, versioned (decision 0025).
-- A pipeline row is the named thing a tenant edits; each change of its definition adds
-- an immutable row to pipeline_versions, and the pipeline's version names its latest.
-- A pipeline run (later work) keeps the version it started with.

CREATE TABLE pipelines (
    id          uuid PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    name        text NOT NULL,
    version     integer NOT NULL,
    state       text NOT NULL CHECK (state IN ('active', 'deleted')),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- A name is unique among a tenant's live pipelines; deleted ones keep theirs for audit.
CREATE UNIQUE INDEX pipelines_tenant_name ON pipelines (tenant_id, name) WHERE state <> 'deleted';
-- Listing with a stable cursor (ids are time-ordered UUIDv7).
CREATE INDEX pipelines_tenant_id ON pipelines (tenant_id, id);

CREATE TABLE pipeline_versions (
    pipeline_id  uuid NOT NULL REFERENCES pipelines (id),
    version      integer NOT NULL,
    definition   jsonb NOT NULL,
    fingerprint  text NOT NULL,
    created_at   timestamptz NOT NULL,
    actor        text NOT NULL,
    PRIMARY KEY (pipeline_id, version)
);
