-- cronwheel PostgreSQL schema, step 16: claims fair across tenants (decision 0028).
-- A claim serves the tenants with pending runs in a pool round by round, each tenant's
-- share weighted by its claim_weight (default 1), so one tenant's backlog cannot delay
-- another's due runs. runs_fair lets the claim find those tenants with one index probe
-- each (a loose index scan over (pool, tenant_id)) and read each tenant's runs in
-- priority then due order, stopping after its share: the claim's cost follows the batch
-- and the number of tenants waiting, never the size of a backlog.
-- max_running caps a tenant's runs in flight across the cluster (NULL: no cap).

ALTER TABLE tenants ADD COLUMN claim_weight double precision NOT NULL DEFAULT 1
    CHECK (claim_weight > 0 AND claim_weight <= 1000);
ALTER TABLE tenants ADD COLUMN max_running integer CHECK (max_running > 0);

CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at) WHERE state = 'pending';

-- The planner's picture of tenants: ANALYZE of a database that had one tenant would say
-- that any tenant's runs are all the runs, and the claim would then read a newcomer's
-- slice through runs_claimable, filtering out the first tenant's whole backlog on every
-- claim (the very moment fairness matters). Told that there are many tenants, it reads
-- a tenant's slice through runs_fair, whatever the statistics were taken on.
ALTER TABLE runs ALTER COLUMN tenant_id SET (n_distinct = 100);

-- max_running, cluster-wide: the room each capped tenant has left, counted by the claim
-- that uses it. One advisory lock (held to the end of the claim's transaction) puts the
-- claims of capped tenants in a line, and the count, in a VOLATILE function, is taken
-- after the lock with a fresh snapshot: it sees every run the previous claim started, so
-- two workers never both fill the same room. Claims that meet no capped tenant call it
-- with empty arrays: no lock, no count.
CREATE FUNCTION cronwheel_claim_rooms(tenants text[], caps integer[])
RETURNS TABLE (out_tenant text, out_room integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(cardinality(tenants), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('cronwheel.max_running'));
    RETURN QUERY
        SELECT t.id, greatest(0, t.cap - (
            SELECT count(*) FROM runs AS r WHERE r.tenant_id = t.id AND r.state = 'running'
        ))::integer
        FROM unnest(tenants, caps) AS t(id, cap);
END
$$;
