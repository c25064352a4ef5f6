-- cronwheel SQLite schema, step 19: concurrency keys (decision 0031).
-- A job may name a key template and a limit (jobs.concurrency): each of its runs carries
-- the key rendered from its payload and the limit, written by the statement that inserts
-- it. A claim starts a keyed run only while fewer than the limit of its tenant's runs
-- with the same key are running: the others stay pending.

ALTER TABLE jobs ADD COLUMN concurrency TEXT;  -- {"key": template, "limit": n}, NULL for none
ALTER TABLE runs ADD COLUMN concurrency_key TEXT;
ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER CHECK (concurrency_limit > 0);

-- Keyed runs leave runs_fair (0016): a tenant's fair slice reads its runs without a key,
-- so a key's backlog, held back by its limit, is never walked by the claim. Every pending
-- run is in exactly one of runs_fair and runs_keyed: no index more to write per run.
DROP INDEX runs_fair;
CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at)
    WHERE state = 'pending' AND concurrency_key IS NULL;

-- The keys with pending runs in a pool, one probe each, and a key's runs in priority then
-- due order: runs without a key are not in it.
CREATE INDEX runs_keyed ON runs (pool, tenant_id, concurrency_key, priority, available_at)
    WHERE state = 'pending' AND concurrency_key IS NOT NULL;
-- What a key has running: one probe per key.
CREATE INDEX runs_keyed_running ON runs (tenant_id, concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
