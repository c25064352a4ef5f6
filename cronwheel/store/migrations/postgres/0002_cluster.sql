-- cronwheel PostgreSQL schema, step 2: what the cluster and the API coordinate through.

-- Scheduler shards: one holder at a time; the epoch grows on every change of holder and
-- guards the holder's writes.
CREATE TABLE shard_leases (
    shard       integer PRIMARY KEY,
    holder      text,
    epoch       bigint NOT NULL DEFAULT 0,
    expires_at  timestamptz
);

CREATE TABLE workers (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL,
    host          text NOT NULL,
    pools         jsonb NOT NULL,
    capacity      integer NOT NULL,
    in_flight     integer NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL
);

CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- API keys are stored as a SHA-256 of the secret, never the secret itself.
CREATE TABLE api_keys (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants (id),
    key_hash    text NOT NULL UNIQUE,
    role        text NOT NULL CHECK (role IN ('admin', 'write', 'read', 'worker')),
    name        text,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- The API's Idempotency-Key header: same key and body → the stored response.
CREATE TABLE idempotency_keys (
    tenant_id     text NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    status        integer NOT NULL,
    response      jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
