-- cronwheel SQLite schema, step 2: what the cluster and the API coordinate through.

-- Scheduler shards: one holder at a time; the epoch grows on every change of holder and
-- guards the holder's writes.
CREATE TABLE shard_leases (
    shard       INTEGER PRIMARY KEY,
    holder      TEXT,
    epoch       INTEGER NOT NULL DEFAULT 0,
    expires_at  INTEGER
);

CREATE TABLE workers (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    host          TEXT NOT NULL,
    pools         TEXT NOT NULL,
    capacity      INTEGER NOT NULL,
    in_flight     INTEGER NOT NULL DEFAULT 0,
    started_at    INTEGER NOT NULL,
    last_seen_at  INTEGER NOT NULL
);

CREATE INDEX workers_last_seen ON workers (last_seen_at);

-- API keys are stored as a SHA-256 of the secret, never the secret itself.
CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants (id),
    key_hash    TEXT NOT NULL UNIQUE,
    role        TEXT NOT NULL CHECK (role IN ('admin', 'write', 'read', 'worker')),
    name        TEXT,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

-- The API's Idempotency-Key header: same key and body → the stored response.
CREATE TABLE idempotency_keys (
    tenant_id     TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    status        INTEGER NOT NULL,
    response      TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, key)
);

CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
