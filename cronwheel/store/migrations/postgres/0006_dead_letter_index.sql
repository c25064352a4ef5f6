-- cronwheel PostgreSQL schema, step 6: the metrics scrape counts the dead-letter queue per tenant
-- (docs/observability.md, Metrics). A partial index of dead runs keeps that count bounded
-- by the queue, not the history; a run enters it only when it dies, so no hot write
-- path pays for it.

CREATE INDEX runs_dead ON runs (tenant_id) WHERE state = 'dead';
