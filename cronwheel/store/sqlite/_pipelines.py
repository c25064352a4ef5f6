"""The SQLite store's pipeline definitions (decision 0025): a pipeline row and its
immutable versions.

Each function runs on the connection's thread inside the transaction that the store
opened for it; the write functions run under SQLite's single write lock, so reading the
latest version and writing the next one cannot interleave with another writer.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from datetime import datetime

from cronwheel.core.model import JSON
from cronwheel.core.pipelines.model import Pipeline, PipelineState, PipelineVersion
from cronwheel.errors import Conflict, NotFound, StaleVersion
from cronwheel.store.sqlite import _ops as ops
from cronwheel.store.sqlite import _rows as rows

# The pipeline with the version the caller picks (?3; NULL: its latest).
_SELECT = """
SELECT p.id, p.tenant_id, p.name, p.state, p.created_at, p.updated_at,
       p.version AS latest_version, v.version, v.definition, v.fingerprint
FROM pipelines p JOIN pipeline_versions v ON v.pipeline_id = p.id
"""


def _pipeline(row: sqlite3.Row) -> Pipeline:
    return Pipeline(
        id=row["id"],
        tenant_id=row["tenant_id"],
        name=row["name"],
        version=row["version"],
        definition=json.loads(row["definition"]),
        fingerprint=row["fingerprint"],
        created_at=rows.dt(row["created_at"]),
        updated_at=rows.dt(row["updated_at"]),
        latest_version=row["latest_version"],
        state=PipelineState(row["state"]),
    )


def create(c: sqlite3.Connection, p: Pipeline, actor: str) -> None:
    # Checked first: the foreign key's IntegrityError would not say which rule broke.
    if c.execute("SELECT 1 FROM tenants WHERE id = ?", (p.tenant_id,)).fetchone() is None:
        raise NotFound("tenant", p.tenant_id)
    at = rows.us(p.created_at)
    try:
        c.execute(
            "INSERT INTO pipelines (id, tenant_id, name, version, state, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (p.id, p.tenant_id, p.name, p.version, p.state.value, at, rows.us(p.updated_at)),
        )
    except sqlite3.IntegrityError as exc:
        if c.execute("SELECT 1 FROM pipelines WHERE id = ?", (p.id,)).fetchone() is not None:
            raise Conflict("id", "a pipeline with this id already exists") from exc
        raise _name_taken(p.name) from exc
    _insert_version(c, p.id, p.version, p.definition, p.fingerprint, at, actor)
    details = {"version": p.version, "name": p.name}
    ops.audit(c, p.tenant_id, "pipeline", p.id, "created", actor, at, details)


def _name_taken(name: str) -> Conflict:
    return Conflict(
        "name",
        f"a live pipeline named {name!r} already exists for this tenant: update it, or"
        " delete it first",
    )


def _insert_version(
    c: sqlite3.Connection,
    pipeline_id: str,
    version: int,
    definition: Mapping[str, JSON],
    fingerprint: str,
    at: int,
    actor: str,
) -> None:
    c.execute(
        "INSERT INTO pipeline_versions"
        " (pipeline_id, version, definition, fingerprint, created_at, actor)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (pipeline_id, version, rows.dumps(definition), fingerprint, at, actor),
    )


def get(
    c: sqlite3.Connection, tenant_id: str, pipeline_id: str, version: int | None
) -> Pipeline | None:
    row = c.execute(
        _SELECT + " AND v.version = ifnull(?, p.version) WHERE p.tenant_id = ? AND p.id = ?",
        (version, tenant_id, pipeline_id),
    ).fetchone()
    return None if row is None else _pipeline(row)


def list_live(
    c: sqlite3.Connection, tenant_id: str, name: str | None, after: str | None, limit: int
) -> list[Pipeline]:
    sql = _SELECT + " AND v.version = p.version WHERE p.tenant_id = ? AND p.state <> 'deleted'"
    params: list[object] = [tenant_id]
    if name is not None:
        sql += " AND p.name = ?"
        params.append(name)
    if after is not None:
        sql += " AND p.id > ?"
        params.append(after)
    sql += " ORDER BY p.id LIMIT ?"
    params.append(limit)
    return [_pipeline(r) for r in c.execute(sql, params)]


def _current(c: sqlite3.Connection, tenant_id: str, pipeline_id: str) -> Pipeline:
    found = get(c, tenant_id, pipeline_id, None)
    if found is None:
        raise NotFound("pipeline", pipeline_id)
    return found


def update(
    c: sqlite3.Connection,
    tenant_id: str,
    pipeline_id: str,
    definition: Mapping[str, JSON],
    fingerprint: str,
    expected_version: int,
    now: datetime,
    actor: str,
) -> Pipeline:
    current = _current(c, tenant_id, pipeline_id)
    if current.state is PipelineState.DELETED:
        raise Conflict("state", "the pipeline is deleted; create a new pipeline instead")
    if current.version != expected_version:
        raise StaleVersion(expected_version, current.version, what="pipeline")
    if current.fingerprint == fingerprint:
        return current  # the same content: no new version, no audit row
    version, at = current.version + 1, rows.us(now)
    _insert_version(c, pipeline_id, version, definition, fingerprint, at, actor)
    c.execute(
        "UPDATE pipelines SET version = ?, updated_at = ? WHERE id = ?", (version, at, pipeline_id)
    )
    ops.audit(c, tenant_id, "pipeline", pipeline_id, "updated", actor, at, {"version": version})
    return _current(c, tenant_id, pipeline_id)


def delete(
    c: sqlite3.Connection, tenant_id: str, pipeline_id: str, now: datetime, actor: str
) -> Pipeline:
    current = _current(c, tenant_id, pipeline_id)
    if current.state is PipelineState.DELETED:
        return current
    at = rows.us(now)
    c.execute(
        "UPDATE pipelines SET state = 'deleted', updated_at = ? WHERE id = ?", (at, pipeline_id)
    )
    ops.audit(c, tenant_id, "pipeline", pipeline_id, "deleted", actor, at)
    return _current(c, tenant_id, pipeline_id)


def versions(
    c: sqlite3.Connection, tenant_id: str, pipeline_id: str, before: int | None, limit: int
) -> list[PipelineVersion]:
    if (
        c.execute(
            "SELECT 1 FROM pipelines WHERE tenant_id = ? AND id = ?", (tenant_id, pipeline_id)
        ).fetchone()
        is None
    ):
        raise NotFound("pipeline", pipeline_id)
    found = c.execute(
        "SELECT * FROM pipeline_versions WHERE pipeline_id = ? AND version < ifnull(?, 2147483647)"
        " ORDER BY version DESC LIMIT ?",
        (pipeline_id, before, limit),
    )
    return [
        PipelineVersion(
            pipeline_id=r["pipeline_id"],
            version=r["version"],
            definition=json.loads(r["definition"]),
            fingerprint=r["fingerprint"],
            created_at=rows.dt(r["created_at"]),
            actor=r["actor"],
        )
        for r in found
    ]
