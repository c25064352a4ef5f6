"""Migrations: a fresh install in one step, an upgrade one migration per transaction.

Every transaction takes the same advisory lock first, so concurrent migrators (several
nodes starting at once) queue: the first one migrates, the others find nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cronwheel.errors import InvalidInput
from cronwheel.store import migrate as migrations
from cronwheel.store.postgres import _sql as sql

if TYPE_CHECKING:
    from cronwheel.store.postgres.store import Connection


async def migrate(conn: Connection, target: int | None) -> list[int]:
    """Up to ``target`` (default: the latest); return the versions applied now. A fresh
    database going to the latest version gets ``schema.sql`` and records every version."""
    steps = migrations.migrations("postgres")
    latest = steps[-1].version
    if target is not None and not 0 <= target <= latest:
        raise InvalidInput("target", f"migration {target} does not exist (latest is {latest})")
    wanted = [m for m in steps if target is None or m.version <= target]
    fresh = target is None or target == latest
    applied: list[int] = []
    while step := await _migrate_one_step(conn, wanted, fresh=fresh):
        applied.extend(step)
    return applied


async def _migrate_one_step(
    conn: Connection, wanted: Sequence[migrations.Migration], *, fresh: bool
) -> list[int]:
    """In one transaction, apply the fresh schema (an empty database and ``fresh``) or the
    next missing migration of ``wanted``; return the versions recorded, [] when done."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", sql.MIGRATION_LOCK)
        await conn.execute(sql.CREATE_MIGRATIONS_TABLE)
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        missing = [m for m in wanted if m.version not in done]
        if not missing:
            return []
        if not done and fresh:
            await conn.execute(migrations.fresh_schema("postgres"))
            todo = [m.version for m in missing]
        else:
            await conn.execute(missing[0].sql)
            todo = [missing[0].version]
        await conn.execute(sql.RECORD_MIGRATIONS, todo)
    return todo
