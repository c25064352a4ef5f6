"""The PostgreSQL server the tests use: found, required in CI, a database per session."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg

DSN = os.environ.get("CRONWHEEL_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
# In CI the PostgreSQL suites must run: an unreachable server fails them instead of skipping.
REQUIRED = (
    os.environ.get("CI", "").lower() == "true" or os.environ.get("CRONWHEEL_REQUIRE_PG") == "1"
)


def _with_database(dsn: str, database: str) -> str:
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{database}"


def _run(coro: Coroutine[Any, Any, None]) -> None:
    # Fixtures may be set up from inside a running event loop (an async test asking for
    # the session database): run the admin work on a thread with a loop of its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coro).result()


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(DSN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def unreachable_reason() -> str | None:
    """None if PostgreSQL answers at DSN, else why not."""
    try:
        _run(_admin("SELECT 1"))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return f"PostgreSQL unreachable at {DSN} ({exc.__class__.__name__}: {exc})"
    return None


def create_database(prefix: str = "cronwheel_test") -> tuple[str, str]:
    """Create an empty database; return (name, dsn)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    _run(_admin(f'CREATE DATABASE "{name}"'))
    return name, _with_database(DSN, name)


def drop_database(name: str) -> None:
    _run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
