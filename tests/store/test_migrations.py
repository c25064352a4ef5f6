"""Migrating step by step gives exactly the schema of a fresh install, on each backend."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from cronwheel.store.base import Store
from cronwheel.store.migrate import migrations
from tests import pg
from tests.conftest import BACKENDS

Dump = dict[str, Any]
StoreFactory = Callable[[], Awaitable[tuple[Store, Callable[[], Awaitable[Dump]]]]]


def _squash(sql: str | None) -> str | None:
    return None if sql is None else re.sub(r"\s+", " ", sql).strip()


def _checks(sql: str) -> list[str]:
    """Every ``CHECK (...)`` clause of a CREATE TABLE, parentheses balanced."""
    found = []
    for start in (m.end() for m in re.finditer(r"CHECK \(", sql)):
        depth, i = 1, start
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            i += 1
        found.append(sql[start : i - 1])
    return found


def _dump_sqlite(path: str) -> Dump:
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                " AND name <> 'schema_migrations' ORDER BY name"
            )
        ]
        dump: Dump = {}
        for t in tables:
            dump[t] = {
                "columns": conn.execute(f"PRAGMA table_xinfo({t})").fetchall(),
                "foreign_keys": conn.execute(f"PRAGMA foreign_key_list({t})").fetchall(),
            }
        dump["indexes"] = [
            (n, tbl, _squash(sql))
            for n, tbl, sql in conn.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
            )
        ]
        dump["checks"] = sorted(
            check
            for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table'")
            for check in _checks(_squash(sql) or "")
        )
        dump["tenants"] = conn.execute("SELECT id, name FROM tenants").fetchall()
        return dump
    finally:
        conn.close()


async def _dump_postgres(dsn: str) -> Dump:
    conn = await asyncpg.connect(dsn)
    try:
        columns = await conn.fetch(
            "SELECT table_name, column_name, ordinal_position, data_type, is_nullable,"
            " column_default, is_identity FROM information_schema.columns"
            " WHERE table_schema = 'public' AND table_name <> 'schema_migrations'"
            " ORDER BY table_name, ordinal_position"
        )
        indexes = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " AND tablename <> 'schema_migrations' ORDER BY indexname"
        )
        constraints = await conn.fetch(
            "SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def"
            " FROM pg_constraint WHERE connamespace = 'public'::regnamespace"
            " AND conrelid::regclass::text <> 'schema_migrations' ORDER BY 1, 2"
        )
        tenants = await conn.fetch("SELECT id, name FROM tenants")
        return {
            "columns": [tuple(r) for r in columns],
            "indexes": [tuple(r) for r in indexes],
            "constraints": [tuple(r) for r in constraints],
            "tenants": [tuple(r) for r in tenants],
        }
    finally:
        await conn.close()


@pytest.fixture(params=BACKENDS)
async def fresh(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Opens stores on brand-new empty databases of one backend, and dumps their schema."""
    opened: list[Store] = []
    databases: list[str] = []

    async def factory() -> tuple[Store, Callable[[], Awaitable[Dump]]]:
        if request.param == "sqlite":
            from cronwheel.store.sqlite import SqliteStore

            path = str(tmp_path / f"db{len(opened)}.sqlite")
            store: Store = await SqliteStore.open(path)
            opened.append(store)

            async def dump_sqlite() -> Dump:
                return _dump_sqlite(path)

            return store, dump_sqlite
        from cronwheel.store.postgres import PostgresStore

        request.getfixturevalue("pg_dsn")  # fails or skips with the reason if unreachable
        name, dsn = pg.create_database("cronwheel_migrate")
        databases.append(name)
        pg_store = await PostgresStore.connect(dsn)
        opened.append(pg_store)
        return pg_store, lambda: _dump_postgres(dsn)

    try:
        yield factory
    finally:
        for s in opened:
            await s.close()
        for name in databases:
            pg.drop_database(name)


async def test_step_by_step_equals_fresh_install(fresh: StoreFactory) -> None:
    steps = [m.version for m in migrations("sqlite")]
    stepped, dump_stepped = await fresh()
    for version in steps:
        assert await stepped.migrate(target=version) == [version]
        assert await stepped.schema_version() == version
    installed, dump_installed = await fresh()
    assert await installed.migrate() == steps
    assert await dump_stepped() == await dump_installed()


async def test_backends_are_numbered_in_step() -> None:
    assert [m.version for m in migrations("sqlite")] == [m.version for m in migrations("postgres")]
    assert [m.name for m in migrations("sqlite")] == [m.name for m in migrations("postgres")]


async def test_an_unknown_target_is_refused(fresh: StoreFactory) -> None:
    store, _ = await fresh()
    with pytest.raises(ValueError, match="target"):
        await store.migrate(target=999)
    assert await store.schema_version() == 0


async def _ddl(store: Store, statement: str) -> None:
    """One schema statement, on either backend, outside the migrations."""
    from cronwheel.store.postgres import PostgresStore
    from cronwheel.store.sqlite import SqliteStore

    if isinstance(store, SqliteStore):
        await store._db.write(lambda c: c.execute(statement))
    else:
        assert isinstance(store, PostgresStore)
        async with store._connection() as conn:
            await conn.execute(statement)


async def _lend_run_report_columns(store: Store) -> None:
    """Step 9's columns, lent to a store at an older step: today's code reads them."""
    from cronwheel.store.sqlite import SqliteStore

    sqlite = isinstance(store, SqliteStore)
    instant = "INTEGER" if sqlite else "timestamptz"
    types = ("REAL", "TEXT", instant, "TEXT" if sqlite else "jsonb", instant)
    names = ("progress", "progress_message", "progress_at", "checkpoint", "checkpoint_at")
    for name, kind in zip(names, types, strict=True):
        await _ddl(store, f"ALTER TABLE runs ADD COLUMN {name} {kind}")


async def _lend_step(store: Store, version: int) -> None:
    """A later migration step's DDL, lent to a store at an older step."""
    from cronwheel.store.sqlite import SqliteStore

    backend = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    [step] = [m for m in migrations(backend) if m.version == version]
    for statement in step.sql.split(";"):
        lines = [line for line in statement.splitlines() if not line.startswith("--")]
        if any(line.strip() for line in lines):
            await _ddl(store, "\n".join(lines))


async def _lend_notifications(store: Store) -> None:
    """Step 11 (jobs.notify and the notifications outbox), lent to a store at an older
    step: today's code writes them."""
    from cronwheel.store.sqlite import SqliteStore

    backend = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    [step] = [m for m in migrations(backend) if m.version == 11]
    for statement in step.sql.split(";"):
        lines = [line for line in statement.splitlines() if not line.startswith("--")]
        if "".join(lines).strip():
            await _ddl(store, "\n".join(lines))


async def _lend_tenant_claim_settings(store: Store) -> None:
    """Step 16's tenant columns and index, lent to a store at an older step: today's
    claim reads them."""
    from cronwheel.store.sqlite import SqliteStore

    real = "REAL" if isinstance(store, SqliteStore) else "double precision"
    await _ddl(store, f"ALTER TABLE tenants ADD COLUMN claim_weight {real} NOT NULL DEFAULT 1")
    await _ddl(store, "ALTER TABLE tenants ADD COLUMN max_running INTEGER")
    await _ddl(
        store,
        "CREATE INDEX runs_fair ON runs (pool, tenant_id, priority, available_at)"
        " WHERE state = 'pending'",
    )
    if not isinstance(store, SqliteStore):  # the claim's max_running rooms
        [step] = [m for m in migrations("postgres") if m.version == 16]
        await _ddl(store, step.sql[step.sql.index("CREATE FUNCTION") :])


async def _lend_concurrency_keys(store: Store) -> None:
    """Step 19 (concurrency keys), lent to a store at an older step: today's code writes
    and claims by them."""
    from cronwheel.store.sqlite import SqliteStore

    backend = "sqlite" if isinstance(store, SqliteStore) else "postgres"
    [step] = [m for m in migrations(backend) if m.version == 19]
    if backend == "postgres":  # a function body holds semicolons: sent whole
        await _ddl(store, step.sql)
        return
    for statement in step.sql.split(";"):
        lines = [line for line in statement.splitlines() if not line.startswith("--")]
        if "".join(lines).strip():
            await _ddl(store, "\n".join(lines))


async def _lend_run_history(store: Store) -> None:
    """Step 20's run_history (PostgreSQL), unpartitioned and empty, lent to a store at an
    older step: a backfill's insert-if-absent probes it."""
    from cronwheel.store.sqlite import SqliteStore

    if not isinstance(store, SqliteStore):
        await _ddl(store, "CREATE TABLE run_history (LIKE runs)")


async def _lend_history_views(store: Store) -> None:
    """Step 20's views of every run and attempt (PostgreSQL), lent to a store at an older
    step over its live tables alone: today's reads select from them."""
    from cronwheel.store.sqlite import SqliteStore

    if not isinstance(store, SqliteStore):
        await _ddl(store, "CREATE VIEW all_runs AS SELECT * FROM runs")
        await _ddl(store, "CREATE VIEW all_attempts AS SELECT * FROM attempts")


async def test_step_5_keeps_attempts_and_allows_permanent_ones(fresh: StoreFactory) -> None:
    """SQLite cannot alter a CHECK: step 5 copies the attempts table. Nothing is lost,
    and the new outcome is accepted afterwards."""
    from cronwheel.core.model import AttemptOutcome, RunState
    from cronwheel.store.base import Completion
    from cronwheel.store.conformance.factories import at, make_job, make_run

    store, _ = await fresh()
    await store.migrate(target=4)
    # Today's code writes the columns that later steps add: lent for the writes below.
    await _ddl(store, "ALTER TABLE jobs ADD COLUMN traceparent TEXT")
    await _ddl(store, "ALTER TABLE attempts ADD COLUMN http_status INTEGER")
    await _ddl(store, "ALTER TABLE attempts ADD COLUMN output TEXT")  # step 23's
    await _lend_run_report_columns(store)
    await _lend_notifications(store)
    await _lend_step(store, 13)  # the pipeline task columns, read with every run
    await _lend_tenant_claim_settings(store)
    await _lend_concurrency_keys(store)
    await _lend_run_history(store)
    job = make_job()
    await store.create_jobs([job])
    await store.materialize_runs([make_run(job, at(0)), make_run(job, at(1))], [])
    claimed = await store.claim_runs(
        "w", ["default"], limit=2, now=at(1), prefetch_until=at(1), lease_seconds=5
    )
    first, second = (c.run for c in claimed)
    failed = Completion(
        run_id=first.id,
        fence=first.fence,
        worker_id="w",
        state=RunState.DEAD,
        outcome=AttemptOutcome.FAILED,
        started_at=at(1),
        finished_at=at(2),
        error_message="before the upgrade",
    )
    assert await store.complete_runs([failed]) == [first.id]
    await _ddl(store, "ALTER TABLE jobs DROP COLUMN traceparent")
    await _ddl(store, "ALTER TABLE attempts DROP COLUMN http_status")
    await _ddl(store, "ALTER TABLE attempts DROP COLUMN output")
    assert await store.migrate(target=5) == [5]
    await _ddl(store, "ALTER TABLE attempts ADD COLUMN http_status INTEGER")  # lent again
    await _ddl(store, "ALTER TABLE attempts ADD COLUMN output TEXT")
    await _lend_history_views(store)
    [kept] = await store.list_attempts("default", first.id)
    assert (kept.outcome, kept.error_message) == (AttemptOutcome.FAILED, "before the upgrade")
    permanent = Completion(
        run_id=second.id,
        fence=second.fence,
        worker_id="w",
        state=RunState.DEAD,
        outcome=AttemptOutcome.PERMANENT,
        started_at=at(1),
        finished_at=at(3),
    )
    assert await store.complete_runs([permanent]) == [second.id]
    [recorded] = await store.list_attempts("default", second.id)
    assert recorded.outcome is AttemptOutcome.PERMANENT
    assert (await store.last_runs("default", [job.id]))[job.id].id == second.id
