-- cronwheel SQLite schema, step 17: the jobs list filtered by pool or by a state other
-- than active, at any number of jobs. Without these, a filter on a pool of a few jobs
-- among millions walks the tenant's jobs in creation order until it has a page of them
-- (bench/atrest.py). A pool's jobs are now a range of their own index, in creation
-- order. The state index leaves out active jobs, the bulk of a store at rest; SQLite
-- uses a partial index only when the query repeats its condition word for word, which
-- list_jobs does (state <> 'active') for every other state.

CREATE INDEX jobs_tenant_pool_id ON jobs (tenant_id, pool, id);
CREATE INDEX jobs_tenant_state_id ON jobs (tenant_id, state, id) WHERE state <> 'active';
