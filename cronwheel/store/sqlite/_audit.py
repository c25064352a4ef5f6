"""The audit log read across entities (``GET /v1/audit``), and the writes that record
changes to tenants and keys beside the change, in its transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from cronwheel.core.model import AuditEntry
from cronwheel.store.base import JobSecrets
from cronwheel.store.sqlite import _ops as ops
from cronwheel.store.sqlite import _rows as rows


def list_entries(
    c: sqlite3.Connection,
    tenant_id: str | None,
    actor: str | None,
    entity: str | None,
    since: datetime | None,
    until: datetime | None,
    before: int | None,
    limit: int,
) -> list[AuditEntry]:
    where, args = [], []
    for clause, value in (
        ("tenant_id = ?", tenant_id),
        ("actor = ?", actor),
        ("entity = ?", entity),
        ("at >= ?", None if since is None else rows.us(since)),
        ("at < ?", None if until is None else rows.us(until)),
        ("id < ?", before),
    ):
        if value is not None:
            where.append(clause)
            args.append(value)
    sql = "SELECT * FROM audit_log"
    if where:
        sql += " WHERE " + " AND ".join(where)
    found = c.execute(f"{sql} ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
    return [rows.audit(r) for r in found]


def replace_job_actions(
    c: sqlite3.Connection,
    tenant_id: str,
    changes: Sequence[JobSecrets],
    actor: str,
    now: datetime,
) -> int:
    changed = 0
    for job in changes:
        notify = rows.dumps([dict(t) for t in job.notify]) if job.notify else None
        cursor = c.execute(
            "UPDATE jobs SET action = ?, notify = ? WHERE tenant_id = ? AND id = ? AND version = ?",
            (rows.dumps(job.action), notify, tenant_id, job.job_id, job.version),
        )
        changed += cursor.rowcount
    if changed:
        details = {"jobs": changed}
        ops.audit(
            c, tenant_id, "tenant", tenant_id, "secrets_resealed", actor, rows.us(now), details
        )
    return changed
