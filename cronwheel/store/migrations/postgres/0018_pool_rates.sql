-- cronwheel PostgreSQL schema, step 18: per-pool rate limits (decision 0033). A pool
-- with a row starts at most per_second runs a second across the cluster: every claim
-- of the pool takes tokens from this bucket first (one second's worth at most).

CREATE TABLE pool_rates (
    pool         text PRIMARY KEY,
    per_second   double precision NOT NULL CHECK (per_second > 0 AND per_second <= 1000000),
    tokens       double precision NOT NULL,
    refilled_at  timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL
);
