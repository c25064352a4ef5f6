"""The audit log read across entities (``GET /v1/audit``), and the rewrite of jobs'
actions when their secrets are sealed again (cronwheel.security.sealing)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
from asyncpg import Record

from cronwheel.core.model import AuditEntry
from cronwheel.store.base import JobSecrets
from cronwheel.store.postgres import _rows as rows

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[Record] | PoolConnectionProxy[Record]

INSERT = (
    "INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7)"
)

# Every filter optional (NULL: any). The planner walks audit_log_tenant_id backwards for
# one tenant, the primary key for all of them, and stops after $7 matches.
LIST = """
SELECT * FROM audit_log
WHERE ($1::text IS NULL OR tenant_id = $1)
  AND ($2::text IS NULL OR actor = $2)
  AND ($3::text IS NULL OR entity = $3)
  AND ($4::timestamptz IS NULL OR at >= $4)
  AND ($5::timestamptz IS NULL OR at < $5)
  AND ($6::bigint IS NULL OR id < $6)
ORDER BY id DESC
LIMIT $7
"""

# One statement for a batch: $1 tenant, $2 ids, $3 versions, $4 actions and $5 notify
# targets (JSON text; NULL: none).
REPLACE_ACTIONS = """
UPDATE jobs SET action = c.action::jsonb, notify = c.notify::jsonb
FROM unnest($2::uuid[], $3::integer[], $4::text[], $5::text[]) AS c(id, version, action, notify)
WHERE jobs.tenant_id = $1 AND jobs.id = c.id AND jobs.version = c.version
"""


async def list_entries(
    conn: Connection,
    tenant_id: str | None,
    actor: str | None,
    entity: str | None,
    since: datetime | None,
    until: datetime | None,
    before: int | None,
    limit: int,
) -> list[AuditEntry]:
    # Two plans, so the one-tenant case always walks its own index rather than a
    # generic plan's choice.
    if tenant_id is None:
        query = LIST.replace("($1::text IS NULL OR tenant_id = $1)", "$1::text IS NULL")
    else:
        query = LIST.replace("($1::text IS NULL OR tenant_id = $1)", "tenant_id = $1")
    found = await conn.fetch(query, tenant_id, actor, entity, since, until, before, limit)
    return [rows.audit(r) for r in found]


async def replace_job_actions(
    conn: Connection,
    tenant_id: str,
    changes: Sequence[JobSecrets],
    actor: str,
    now: datetime,
) -> int:
    if not changes:
        return 0
    ids = [c.job_id for c in changes]
    versions = [c.version for c in changes]
    actions = [rows.dumps(c.action) for c in changes]
    notify = [rows.dumps([dict(t) for t in c.notify]) if c.notify else None for c in changes]
    async with conn.transaction():
        args = (tenant_id, ids, versions, actions, notify)
        status = await conn.execute(REPLACE_ACTIONS, *args)
        changed = int(status.split()[-1])
        if changed:
            details: dict[str, Any] = {"jobs": changed}
            entry = (tenant_id, "tenant", tenant_id, "secrets_resealed", actor, now, details)
            await conn.execute(INSERT, *entry)
    return changed
