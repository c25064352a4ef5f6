-- cronwheel SQLite schema, step 10: the jobs list sorted by name or by next fire time
-- (GET /v1/jobs?order=name|next_fire, the dashboard's sort links). Each order walks its
-- own index from the cursor (sort value, id) on, either way, so a page is an index walk
-- at any number of jobs, never a sort of the tenant's jobs. Names compare as bytes
-- (BINARY), as on PostgreSQL (COLLATE "C").
--
-- next_fire_sort is what the next-fire order sorts by: next_fire_at for an active job, and
-- after every instant for a job that will not fire (not active, or without a next fire
-- time). A VIRTUAL generated column (computed when read, nothing stored in the table),
-- not an expression in the index: SQLite searches an index by a row value such as
-- (next_fire_sort, id) > (?, ?) only on columns, and would otherwise walk the tenant's
-- jobs from the first to the cursor.

ALTER TABLE jobs ADD COLUMN next_fire_sort INTEGER
    GENERATED ALWAYS AS (ifnull(CASE WHEN state = 'active' THEN next_fire_at END, 9223372036854775807)) VIRTUAL;
CREATE INDEX jobs_tenant_name_id ON jobs (tenant_id, name, id);
CREATE INDEX jobs_tenant_next_fire ON jobs (tenant_id, next_fire_sort, id);
