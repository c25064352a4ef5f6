-- cronwheel SQLite schema, step 14: each tenant's run-creation token bucket, kept in the
-- store so that max_creates_per_second holds for every process on the database
-- (decision 0027). create_tokens is what the bucket held at create_tokens_at
-- (microseconds); NULL: a full bucket.

ALTER TABLE tenants ADD COLUMN create_tokens REAL;
ALTER TABLE tenants ADD COLUMN create_tokens_at INTEGER;
