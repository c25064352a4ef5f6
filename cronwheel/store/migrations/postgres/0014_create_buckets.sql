-- cronwheel PostgreSQL schema, step 14: each tenant's run-creation token bucket, kept in
-- the store so that max_creates_per_second holds for the whole cluster, however many API
-- processes share the database (decision 0027). create_tokens is what the bucket held at
-- create_tokens_at; NULL (a tenant that never created anything since): a full bucket.
-- Nullable columns without a default: no table rewrite.

ALTER TABLE tenants ADD COLUMN create_tokens double precision;
ALTER TABLE tenants ADD COLUMN create_tokens_at timestamptz;
