"""The PostgreSQL store's pipeline definitions (decision 0025): a pipeline row and its
immutable versions.

Each write is one statement (data-modifying CTEs: the pipeline, its version and the
audit entry together) after, for an update or a delete, the pipeline's row is locked, so
two writers cannot both store "the next version".
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
from asyncpg import Record

from cronwheel.core.model import JSON
from cronwheel.core.pipelines.model import Pipeline, PipelineState, PipelineVersion
from cronwheel.errors import Conflict, NotFound, StaleVersion
from cronwheel.store.postgres._rows import is_uuid

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Connection: TypeAlias = asyncpg.Connection[Record] | PoolConnectionProxy[Record]

_SELECT = """
SELECT p.id, p.tenant_id, p.name, p.state, p.created_at, p.updated_at,
       p.version AS latest_version, v.version, v.definition, v.fingerprint
FROM pipelines p JOIN pipeline_versions v ON v.pipeline_id = p.id
"""

GET = (
    _SELECT
    + " AND v.version = coalesce($3::integer, p.version) WHERE p.tenant_id = $1 AND p.id = $2"
)

LIST = (
    _SELECT + " AND v.version = p.version WHERE p.tenant_id = $1 AND p.state <> 'deleted'"
    " AND ($2::text IS NULL OR p.name = $2) AND ($3::uuid IS NULL OR p.id > $3)"
    " ORDER BY p.id LIMIT $4"
)

# The pipeline's row, locked until the transaction ends. Alone, not joined to its
# version: a locker that waited re-checks only the locked row against its WHERE, so a
# join to the version it read before the wait would drop the row (and say NotFound).
LOCK = "SELECT version, state FROM pipelines WHERE tenant_id = $1 AND id = $2 FOR UPDATE"

# Read after LOCK, in a statement of its own: it sees the version a writer that held
# the lock before us committed.
FINGERPRINT = "SELECT fingerprint FROM pipeline_versions WHERE pipeline_id = $1 AND version = $2"

# Params: $1 id, $2 tenant, $3 name, $4 version, $5 created_at, $6 definition,
# $7 fingerprint, $8 actor, $9 audit details.
CREATE = """
WITH p AS (
    INSERT INTO pipelines (id, tenant_id, name, version, state, created_at, updated_at)
    VALUES ($1, $2, $3, $4, 'active', $5, $5)
    RETURNING id
), v AS (
    INSERT INTO pipeline_versions (pipeline_id, version, definition, fingerprint, created_at, actor)
    SELECT id, $4, $6, $7, $5, $8 FROM p
)
INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)
SELECT $2, 'pipeline', id::text, 'created', $8, $5, $9 FROM p
"""

# Params: $1 id, $2 tenant, $3 new version, $4 now, $5 definition, $6 fingerprint,
# $7 actor, $8 audit details.
UPDATE = """
WITH v AS (
    INSERT INTO pipeline_versions (pipeline_id, version, definition, fingerprint, created_at, actor)
    VALUES ($1, $3, $5, $6, $4, $7)
), p AS (
    UPDATE pipelines SET version = $3, updated_at = $4 WHERE id = $1
)
INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at, details)
VALUES ($2, 'pipeline', $1::text, 'updated', $7, $4, $8)
"""

# Params: $1 id, $2 tenant, $3 now, $4 actor.
DELETE = """
WITH p AS (
    UPDATE pipelines SET state = 'deleted', updated_at = $3 WHERE id = $1
)
INSERT INTO audit_log (tenant_id, entity, entity_id, action, actor, at)
VALUES ($2, 'pipeline', $1::text, 'deleted', $4, $3)
"""

VERSIONS = """
SELECT v.* FROM pipeline_versions v JOIN pipelines p ON p.id = v.pipeline_id
WHERE p.tenant_id = $1 AND p.id = $2 AND ($3::integer IS NULL OR v.version < $3)
ORDER BY v.version DESC LIMIT $4
"""

EXISTS = "SELECT 1 FROM pipelines WHERE tenant_id = $1 AND id = $2"


def _pipeline(row: Record) -> Pipeline:
    return Pipeline(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        version=row["version"],
        definition=row["definition"],
        fingerprint=row["fingerprint"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        latest_version=row["latest_version"],
        state=PipelineState(row["state"]),
    )


async def create(conn: Connection, p: Pipeline, actor: str) -> None:
    args: list[Any] = [p.id, p.tenant_id, p.name, p.version, p.created_at]
    args += [p.definition, p.fingerprint, actor, {"version": p.version, "name": p.name}]
    try:
        await conn.execute(CREATE, *args)
    except asyncpg.ForeignKeyViolationError as exc:  # pipelines_tenant_id_fkey
        raise NotFound("tenant", p.tenant_id) from exc
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "pipelines_pkey":
            raise Conflict("id", "a pipeline with this id already exists") from exc
        raise Conflict(
            "name",
            f"a live pipeline named {p.name!r} already exists for this tenant: update it, or"
            " delete it first",
        ) from exc


async def get(
    conn: Connection, tenant_id: str, pipeline_id: str, version: int | None
) -> Pipeline | None:
    if not is_uuid(pipeline_id):
        return None
    row = await conn.fetchrow(GET, tenant_id, pipeline_id, version)
    return None if row is None else _pipeline(row)


async def list_live(
    conn: Connection, tenant_id: str, name: str | None, after: str | None, limit: int
) -> list[Pipeline]:
    if after is not None and not is_uuid(after):
        return []
    return [_pipeline(r) for r in await conn.fetch(LIST, tenant_id, name, after, limit)]


async def _locked(conn: Connection, tenant_id: str, pipeline_id: str) -> Record:
    row = await conn.fetchrow(LOCK, tenant_id, pipeline_id) if is_uuid(pipeline_id) else None
    if row is None:
        raise NotFound("pipeline", pipeline_id)
    return row


async def _reread(conn: Connection, tenant_id: str, pipeline_id: str) -> Pipeline:
    found = await get(conn, tenant_id, pipeline_id, None)
    assert found is not None  # locked by this transaction: it cannot have gone
    return found


async def update(
    conn: Connection,
    tenant_id: str,
    pipeline_id: str,
    definition: Mapping[str, JSON],
    fingerprint: str,
    expected_version: int,
    now: datetime,
    actor: str,
) -> Pipeline:
    async with conn.transaction():
        current = await _locked(conn, tenant_id, pipeline_id)
        if current["state"] == PipelineState.DELETED.value:
            raise Conflict("state", "the pipeline is deleted; create a new pipeline instead")
        if current["version"] != expected_version:
            raise StaleVersion(expected_version, current["version"], what="pipeline")
        latest = await conn.fetchval(FINGERPRINT, pipeline_id, current["version"])
        if latest != fingerprint:  # the same content: nothing to write
            version = current["version"] + 1
            args = (pipeline_id, tenant_id, version, now, definition, fingerprint, actor)
            await conn.execute(UPDATE, *args, {"version": version})
        return await _reread(conn, tenant_id, pipeline_id)


async def delete(
    conn: Connection, tenant_id: str, pipeline_id: str, now: datetime, actor: str
) -> Pipeline:
    async with conn.transaction():
        current = await _locked(conn, tenant_id, pipeline_id)
        if current["state"] != PipelineState.DELETED.value:
            await conn.execute(DELETE, pipeline_id, tenant_id, now, actor)
        return await _reread(conn, tenant_id, pipeline_id)


async def versions(
    conn: Connection, tenant_id: str, pipeline_id: str, before: int | None, limit: int
) -> list[PipelineVersion]:
    found = (
        await conn.fetch(VERSIONS, tenant_id, pipeline_id, before, limit)
        if is_uuid(pipeline_id)
        else []
    )
    if not found and (
        not is_uuid(pipeline_id) or await conn.fetchval(EXISTS, tenant_id, pipeline_id) is None
    ):
        raise NotFound("pipeline", pipeline_id)
    return [
        PipelineVersion(
            pipeline_id=r["pipeline_id"],
            version=r["version"],
            definition=r["definition"],
            fingerprint=r["fingerprint"],
            created_at=r["created_at"],
            actor=r["actor"],
        )
        for r in found
    ]
