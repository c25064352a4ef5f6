"""The SQLite store's administrative verbs: tenants, API keys, idempotent responses and
the worker registry.

Each function runs on the connection's thread inside the transaction that
:class:`~cronwheel.store.sqlite._conn.Connection` opened for it (``read`` or ``write``);
:class:`~cronwheel.store.sqlite.store.SqliteStore` only picks which.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from cronwheel.core.model import ApiKey, Job, StoredResponse, Tenant, WorkerInfo
from cronwheel.errors import Conflict, NotFound
from cronwheel.store.base import TokenTake, max_jobs_refusal
from cronwheel.store.sqlite import _rows as rows

# -- tenants -------------------------------------------------------------------------


def create_tenant(c: sqlite3.Connection, tenant: Tenant) -> None:
    try:
        c.execute(
            "INSERT INTO tenants (id, name, max_jobs, max_creates_per_second, created_at,"
            " claim_weight, max_running) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                tenant.id,
                tenant.name,
                tenant.max_jobs,
                tenant.max_creates_per_second,
                rows.us(tenant.created_at),
                tenant.claim_weight,
                tenant.max_running,
            ),
        )
    except sqlite3.IntegrityError as exc:  # the primary key: the only constraint it can break
        raise Conflict("id", f"tenant '{tenant.id}' already exists") from exc


def get_tenant(c: sqlite3.Connection, tenant_id: str) -> Tenant | None:
    row = c.execute("SELECT * FROM tenants WHERE id = ?", (tenant_id,)).fetchone()
    return None if row is None else rows.tenant(row)


def list_tenants(c: sqlite3.Connection) -> list[Tenant]:
    return [rows.tenant(r) for r in c.execute("SELECT * FROM tenants ORDER BY id")]


def update_tenant(c: sqlite3.Connection, tenant: Tenant) -> Tenant:
    # created_at is the tenant's birth, not part of its definition: never rewritten.
    row = c.execute(
        "UPDATE tenants SET name = ?, max_jobs = ?, max_creates_per_second = ?,"
        " claim_weight = ?, max_running = ? WHERE id = ? RETURNING *",
        (
            tenant.name,
            tenant.max_jobs,
            tenant.max_creates_per_second,
            tenant.claim_weight,
            tenant.max_running,
            tenant.id,
        ),
    ).fetchone()
    if row is None:
        raise NotFound("tenant", tenant.id)
    return rows.tenant(row)


def count_live_jobs(c: sqlite3.Connection, tenant_id: str, limit: int | None) -> int:
    count: int = c.execute(
        "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE tenant_id = ?"
        " AND state NOT IN ('cancelled', 'completed') LIMIT ?)",
        (tenant_id, -1 if limit is None else limit),  # LIMIT -1: no limit
    ).fetchone()[0]
    return count


def check_max_jobs(c: sqlite3.Connection, jobs: Sequence[Job]) -> None:
    """Refuse (OverLimit) jobs that would take a tenant past its max_jobs. Run inside the
    create's write transaction, which holds the database's write lock: no other create,
    in this process or another, counts or inserts in between."""
    per_tenant: dict[str, int] = {}
    for job in jobs:
        per_tenant[job.tenant_id] = per_tenant.get(job.tenant_id, 0) + 1
    for tenant_id, adding in per_tenant.items():
        row = c.execute("SELECT max_jobs FROM tenants WHERE id = ?", (tenant_id,)).fetchone()
        if row is None or row[0] is None:
            continue
        live = count_live_jobs(c, tenant_id, row[0] + 1)  # no further than one past it
        if live + adding > row[0]:
            raise max_jobs_refusal(live, adding, row[0])


# The create bucket's content at :now (decision 0027): what it held, refilled at the
# tenant's rate since its time (never backwards), capped at one second's worth
# (cronwheel.store.base.bucket_capacity); NULL, a bucket never used: full. SQLite's
# two-argument max() and min() are GREATEST and LEAST; instants are microseconds.
_BUCKET = (
    "min(max(max_creates_per_second, 1.0), coalesce(create_tokens"
    " + max_creates_per_second * max((:now - create_tokens_at) / 1e6, 0.0),"
    " max(max_creates_per_second, 1.0)))"
)


def take_create_tokens(
    c: sqlite3.Connection, tenant_id: str, count: int, now: datetime
) -> TokenTake:
    """One UPDATE inside a write transaction (the database's write lock): the take is
    atomic for every process on the file. The refusal's content is read after it, under
    the same lock, so it is exact."""
    args = {"id": tenant_id, "count": count, "now": rows.us(now)}
    taken = c.execute(
        f"UPDATE tenants SET create_tokens = {_BUCKET} - :count,"
        " create_tokens_at = max(coalesce(create_tokens_at, :now), :now)"
        " WHERE id = :id AND max_creates_per_second IS NOT NULL"
        f" AND {_BUCKET} >= min(:count, max(max_creates_per_second, 1.0))"
        " RETURNING max_creates_per_second",
        args,
    ).fetchone()
    if taken is not None:
        return TokenTake(True, taken[0])
    row = c.execute(
        f"SELECT max_creates_per_second, {_BUCKET} FROM tenants WHERE id = :id", args
    ).fetchone()
    if row is None:  # no such tenant: nothing to limit (its create fails on its own)
        return TokenTake(True, None)
    return TokenTake.of(row[0], row[1], False, count)


# -- API keys ------------------------------------------------------------------------


def create_api_key(c: sqlite3.Connection, key: ApiKey) -> None:
    # Checked first rather than read off the foreign key's IntegrityError, which SQLite
    # does not attribute to a constraint.
    if c.execute("SELECT 1 FROM tenants WHERE id = ?", (key.tenant_id,)).fetchone() is None:
        raise NotFound("tenant", key.tenant_id)
    try:
        c.execute(
            "INSERT INTO api_keys (id, tenant_id, key_hash, role, name, created_at, revoked_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key.id,
                key.tenant_id,
                key.key_hash,
                key.role.value,
                key.name,
                rows.us(key.created_at),
                rows.us_or_none(key.revoked_at),
            ),
        )
    except sqlite3.IntegrityError as exc:
        raise _key_conflict(c, key) from exc


def _key_conflict(c: sqlite3.Connection, key: ApiKey) -> Conflict:
    """Which uniqueness rule a new key broke: its id, else its hash."""
    if c.execute("SELECT 1 FROM api_keys WHERE id = ?", (key.id,)).fetchone() is not None:
        return Conflict("id", f"API key '{key.id}' already exists")
    return Conflict("id", "an API key with the same secret already exists")


def find_api_key(c: sqlite3.Connection, key_hash: str) -> ApiKey | None:
    row = c.execute("SELECT * FROM api_keys WHERE key_hash = ?", (key_hash,)).fetchone()
    return None if row is None else rows.api_key(row)


def list_api_keys(c: sqlite3.Connection, tenant_id: str) -> list[ApiKey]:
    found = c.execute(
        "SELECT * FROM api_keys WHERE tenant_id = ? ORDER BY created_at, id", (tenant_id,)
    )
    return [rows.api_key(r) for r in found]


def revoke_api_key(c: sqlite3.Connection, tenant_id: str, key_id: str, now: datetime) -> ApiKey:
    # coalesce: revoking again keeps the first instant, the one audits care about.
    row = c.execute(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?)"
        " WHERE tenant_id = ? AND id = ? RETURNING *",
        (rows.us(now), tenant_id, key_id),
    ).fetchone()
    if row is None:
        raise NotFound("key", key_id)
    return rows.api_key(row)


# -- API idempotency -------------------------------------------------------------------


def save_response(c: sqlite3.Connection, response: StoredResponse) -> StoredResponse:
    """Insert unless kept already, then read back what is kept. Run under ``write``: the
    write lock is held from BEGIN, so no other writer can slip between the two."""
    c.execute(
        "INSERT INTO idempotency_keys (tenant_id, key, request_hash, status, response,"
        " created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, key) DO NOTHING",
        (
            response.tenant_id,
            response.key,
            response.request_hash,
            response.status,
            rows.dumps(response.body),  # None becomes the JSON text "null"
            rows.us(response.created_at),
        ),
    )
    kept = get_response(c, response.tenant_id, response.key)
    assert kept is not None  # inserted or already there, and nobody else can write now
    return kept


def get_response(c: sqlite3.Connection, tenant_id: str, key: str) -> StoredResponse | None:
    row = c.execute(
        "SELECT * FROM idempotency_keys WHERE tenant_id = ? AND key = ?", (tenant_id, key)
    ).fetchone()
    return None if row is None else rows.response(row)


def delete_responses(c: sqlite3.Connection, before: datetime) -> int:
    cursor = c.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (rows.us(before),))
    return cursor.rowcount


# -- worker registry -------------------------------------------------------------------


def register_worker(c: sqlite3.Connection, worker: WorkerInfo) -> None:
    # started_at is left out of the update: a heartbeat refreshes the record, and the
    # first registration is when the worker started.
    c.execute(
        "INSERT INTO workers (id, tenant_id, host, pools, capacity, in_flight, started_at,"
        " last_seen_at, brokers, commands) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (id) DO UPDATE SET tenant_id = excluded.tenant_id,"
        " host = excluded.host, pools = excluded.pools, capacity = excluded.capacity,"
        " in_flight = excluded.in_flight, last_seen_at = excluded.last_seen_at,"
        " brokers = excluded.brokers, commands = excluded.commands",
        (
            worker.id,
            worker.tenant_id,
            worker.host,
            rows.dumps(list(worker.pools)),
            worker.capacity,
            worker.in_flight,
            rows.us(worker.started_at),
            rows.us(worker.last_seen_at),
            rows.dumps(dict(worker.brokers)),
            rows.dumps(list(worker.commands)),
        ),
    )


def list_workers(c: sqlite3.Connection, tenant_id: str, seen_since: datetime) -> list[WorkerInfo]:
    found = c.execute(
        "SELECT * FROM workers WHERE tenant_id = ? AND last_seen_at >= ? ORDER BY id",
        (tenant_id, rows.us(seen_since)),
    )
    return [rows.worker(r) for r in found]


def served_pools(c: sqlite3.Connection, tenant_id: str, seen_since: datetime) -> set[str]:
    # A remote worker's id is "<tenant>/<id>" and it claims for its tenant only; any other
    # worker claims for every tenant.
    found = c.execute(
        "SELECT DISTINCT p.value FROM workers AS w, json_each(w.pools) AS p"
        " WHERE w.last_seen_at >= ? AND (w.tenant_id = ?"
        " OR substr(w.id, 1, length(w.tenant_id) + 1) <> w.tenant_id || '/')",
        (rows.us(seen_since), tenant_id),
    )
    return {r[0] for r in found}


def remove_worker(c: sqlite3.Connection, worker_id: str) -> None:
    c.execute("DELETE FROM workers WHERE id = ?", (worker_id,))
