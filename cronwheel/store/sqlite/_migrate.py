"""Applying the SQLite migrations, in the caller's transaction."""

from __future__ import annotations

import sqlite3

from cronwheel.errors import InvalidInput
from cronwheel.store import migrate as migrations
from cronwheel.store.sqlite._ops import now_us


def migrate(c: sqlite3.Connection, target: int | None) -> list[int]:
    c.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations"
        " (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)"
    )
    done = {r[0] for r in c.execute("SELECT version FROM schema_migrations")}
    steps = migrations.migrations("sqlite")
    latest = steps[-1].version
    if target is not None and not 0 <= target <= latest:
        raise InvalidInput("target", f"migration {target} does not exist (latest is {latest})")
    steps = [m for m in steps if target is None or m.version <= target]
    now = now_us(c)
    if not done and (target is None or target == latest):
        executescript(c, migrations.fresh_schema("sqlite"))
        todo = [m.version for m in steps]
    else:
        todo = [m.version for m in steps if m.version not in done]
        for m in steps:
            if m.version in todo:
                executescript(c, m.sql)
    c.executemany(
        "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
        [(v, now) for v in todo],
    )
    return todo


def executescript(c: sqlite3.Connection, script: str) -> None:
    # sqlite3.executescript would COMMIT our transaction first; run statement by statement
    # so a migration is all or nothing.
    for statement in split_sql(script):
        c.execute(statement)


def split_sql(script: str) -> list[str]:
    statements, current = [], []
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if sqlite3.complete_statement("\n".join(current)):
            statements.append("\n".join(current).strip())
            current = []
    return [s for s in statements if s]


def schema_version(c: sqlite3.Connection) -> int:
    exists = c.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    value: int | None = c.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
    return value or 0
