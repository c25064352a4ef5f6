-- cronwheel PostgreSQL schema, step 17: the jobs list filtered by pool or by a state
-- other than active, at any number of jobs. Without these, GET /v1/jobs?pool=P walks
-- the tenant's jobs in creation order until it has a page of P's, so a pool of a few
-- jobs among ten million read every one of them (3 s at 10M, bench/atrest.py); the same
-- for ?state=paused when few jobs are paused. A pool's jobs are now a range of their own
-- index, in creation order. The state index leaves out active jobs, the bulk of a store
-- at rest: a filter on active matches most jobs and finds a page at once without it,
-- and a job created active costs no entry in it (list_jobs repeats the index's
-- condition, state <> 'active', so even a generic plan may use it).
-- Writes to jobs wait while the two indexes are built (a read of every job's row).

CREATE INDEX jobs_tenant_pool_id ON jobs (tenant_id, pool, id);
CREATE INDEX jobs_tenant_state_id ON jobs (tenant_id, state, id) WHERE state <> 'active';
