-- cronwheel SQLite schema, step 16: claims fair across tenants (decision 0028).
-- A claim serves the tenants with pending runs in a pool round by round, each tenant's
-- share weighted by its claim_weight (default 1), so one tenant's backlog cannot delay
-- another's due runs. runs_fair lets the claim find those tenants with one index probe
-- each (a loose index scan over (pool, tenant_id)) and read each tenant's runs in
-- priority then due order, stopping after its share: the claim's cost follows the batch
-- and the number of tenants waiting, never the size of a backlog.
-- max_running caps a tenant's runs in flight across the cluster (NULL: no cap).

ALTER TABLE tenants ADD COLUMN claim_weight REAL NOT NULL DEFAULT 1
    CHECK (claim_weight > 0 AND claim_weight <= 1000);
ALTER TABLE tenants ADD COLUMN max_running INTEGER CHECK (max_running > 0);

CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at) WHERE state = 'pending';
