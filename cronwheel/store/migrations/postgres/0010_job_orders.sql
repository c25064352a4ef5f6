-- cronwheel PostgreSQL schema, step 10: the jobs list sorted by name or by next fire
-- time (GET /v1/jobs?order=name|next_fire, the dashboard's sort links). Each order
-- walks its own index from the cursor (sort value, id) on, either way, so a page is an
-- index scan at any number of jobs, never a sort of the tenant's jobs. Names compare
-- in byte (= code point) order, COLLATE "C", as SQLite's BINARY does, whatever the
-- database's collation; a job that will not fire (not active, or active without a next
-- fire time) sorts after every instant.
-- Written as the queries write them (JOB_ORDER in cronwheel/store/postgres/_sql.py).
-- Writes to jobs wait while the two indexes are built (a read of every job's row).

CREATE INDEX jobs_tenant_name_id ON jobs (tenant_id, name COLLATE "C", id);
CREATE INDEX jobs_tenant_next_fire ON jobs (tenant_id, coalesce(CASE WHEN state = 'active' THEN next_fire_at END, 'infinity'::timestamptz), id);
