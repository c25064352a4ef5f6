-- cronwheel SQLite schema, step 9: the jobs list sorted by name or by next fire time
-- (GET /v1/jobs?order=name|next_fire, the dashboard's sort links). Each order walks its
-- own index from the cursor (sort value, id) on, either way, so a page is an index walk
-- at any number of jobs, never a sort of the tenant's jobs. Names compare as bytes
-- (BINARY), as on PostgreSQL (COLLATE "C"); a job that will not fire (not active, or
-- active without a next fire time) sorts after every instant. Written exactly as the
-- queries write them (JOB_ORDER_COLUMN in cronwheel/store/sqlite/store.py): SQLite
-- matches an index expression by its text.

CREATE INDEX jobs_tenant_name_id ON jobs (tenant_id, name, id);
CREATE INDEX jobs_tenant_next_fire ON jobs (tenant_id, ifnull(CASE WHEN state = 'active' THEN next_fire_at END, 9223372036854775807), id);
