-- cronwheel PostgreSQL schema, step 15: the audit log by tenant, newest first (GET /v1/audit,
-- decision 0026): one tenant's page walks its own entries, not the whole log backwards.

CREATE INDEX audit_log_tenant_id ON audit_log (tenant_id, id);
