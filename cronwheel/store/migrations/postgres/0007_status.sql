-- cronwheel PostgreSQL schema, step 7: cheap reads for `cronwheel status` (GET /v1/status).
-- The start lag, throughput and failures of the last minutes are read from the attempts
-- that finished in that window, found by their finish time; the dead-letter count per
-- pool from an index of dead runs alone (dead runs are few, and leave with retention).
-- Neither read ever scans the runs or attempts table.

CREATE INDEX attempts_finished ON attempts (finished_at);
CREATE INDEX runs_dead ON runs (tenant_id, pool) WHERE state = 'dead';
