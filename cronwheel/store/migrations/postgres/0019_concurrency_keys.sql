-- cronwheel PostgreSQL schema, step 19: concurrency keys (decision 0031).
-- A job may name a key template and a limit (jobs.concurrency): each of its runs carries
-- the key rendered from its payload and the limit, written by the statement that inserts
-- it. A claim starts a keyed run only while fewer than the limit of its tenant's runs
-- with the same key are running, across the cluster: the others stay pending.

ALTER TABLE jobs ADD COLUMN concurrency jsonb;  -- {"key": template, "limit": n}, NULL for none
ALTER TABLE runs ADD COLUMN concurrency_key text;
ALTER TABLE runs ADD COLUMN concurrency_limit integer CHECK (concurrency_limit > 0);

-- Keyed runs leave runs_fair (0016): a tenant's fair slice reads its runs without a key,
-- so a key's backlog, held back by its limit, is never walked by the claim. Every pending
-- run is in exactly one of runs_fair and runs_keyed: no index more to write per run.
DROP INDEX runs_fair;
CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at)
    WHERE state = 'pending' AND concurrency_key IS NULL;

-- The claim finds the keys with pending runs in a pool by a loose index scan (one probe
-- per (tenant, key)) and reads a key's runs in priority then due order, as runs_fair does
-- for tenants. Runs without a key are not in it: it costs nothing to jobs without keys.
CREATE INDEX runs_keyed ON runs (pool, tenant_id, concurrency_key, priority, available_at)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
-- What a key has running: one probe per key, never a scan of the running runs.
CREATE INDEX runs_keyed_running ON runs (tenant_id, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;

-- The room each key has left, counted by the claim that uses it. One advisory lock (held
-- to the end of the claim's transaction) puts the claims that meet keyed runs in a line,
-- and the count, in a VOLATILE function, is taken after the lock with a fresh snapshot:
-- it sees every run the previous claim started, so two workers never both fill the same
-- key's room. A key's limit is the smallest of its next pending run's and its running
-- runs' (jobs naming the same key with different limits: the strictest holds). Claims
-- that meet no keyed run call it with empty arrays: no lock, no count.
CREATE FUNCTION cronwheel_claim_key_rooms(tenants text[], keys text[], limits integer[])
RETURNS TABLE (out_tenant text, out_key text, out_room integer)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF coalesce(cardinality(tenants), 0) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('cronwheel.concurrency'));
    RETURN QUERY
        SELECT t.id, t.k, greatest(0, least(t.lim, coalesce(r.lim, t.lim)) - r.n)::integer
        FROM unnest(tenants, keys, limits) AS t(id, k, lim)
        CROSS JOIN LATERAL (
            SELECT count(*) AS n, min(x.concurrency_limit) AS lim FROM runs AS x
            WHERE x.tenant_id = t.id AND x.concurrency_key = t.k AND x.state = 'running'
        ) AS r;
END
$$;
