"""Vacuum of the live tables from maintenance, for servers whose autovacuum is off or
too slow (decision 0032).

Every run leaves about three dead tuples in ``runs`` (its claim, its completion, the
archive's delete) and its attempt one in ``attempts``. Migration 0020 asks autovacuum to
visit both often, but a server may run with ``autovacuum = off``, or with workers busy
elsewhere: then both tables and their indexes grow without bound and every claim walks
more dead index entries. Maintenance reads the statistics of both tables on each pass
(one cheap query) and vacuums a table whose dead tuples passed the threshold.

What keeps it off the hot path: a plain ``VACUUM`` (never FULL) takes SHARE UPDATE
EXCLUSIVE on the table, which no read or write of a run conflicts with; ``TRUNCATE
false`` spares the ACCESS EXCLUSIVE lock that giving the table's empty tail back to the
file system takes (brief, but the one lock a claim waits for, and a read replica replays
it, cancelling its reads), and the table refills those pages within seconds anyway;
``SKIP_LOCKED`` and a lock timeout mean it never queues behind another vacuum, an
``ANALYZE`` or a migration: the next pass tries again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import asyncpg

from cronwheel.store.base import Vacuum

if TYPE_CHECKING:
    from cronwheel.store.postgres.store import Connection

VACUUM_LOCK = 0x63777661_6375  # "cwvacu": one maintenance process vacuums at a time
"""The advisory lock (session level, tried without waiting) that the vacuuming process
holds: a pass that outlived its maintenance lease must not vacuum beside the next one."""

LOCK_TIMEOUT = "1s"
"""The most a vacuum waits for a lock that ``SKIP_LOCKED`` does not cover (an index's,
the TOAST table's): a busy lock means the next pass tries again."""

TABLES = ("runs", "attempts")

LOCK_NOT_AVAILABLE = "55P03"
"""The SQLSTATE of the warning a ``SKIP_LOCKED`` vacuum gives when the table's lock is
held (by another vacuum, an ``ANALYZE``, a migration)."""

# Params: $1 the minimum of dead tuples, $2 the fraction of live tuples. The statistics
# are the server's estimates (flushed by each backend about once a second): good enough
# for a threshold. A vacuum in progress of the same table (autovacuum's, an operator's)
# shows in pg_stat_progress_vacuum; a role without pg_read_all_stats sees its relid as
# NULL there, and then SKIP_LOCKED is what skips it.
STATS = """
SELECT s.relname AS table_name, s.n_live_tup AS live, s.n_dead_tup AS dead,
       EXISTS (SELECT 1 FROM pg_stat_progress_vacuum AS p
               WHERE p.relid = s.relid AND p.datname = current_database()) AS running
FROM pg_stat_user_tables AS s
WHERE s.relid IN ('runs'::regclass, 'attempts'::regclass)
  AND s.n_dead_tup > greatest($1::bigint, $2::float8 * s.n_live_tup)
ORDER BY s.relname DESC"""


async def vacuum_live_tables(
    conn: Connection, *, min_dead_tuples: int, dead_fraction: float
) -> list[Vacuum]:
    """Vacuum ``runs`` and ``attempts`` where their dead tuples passed the threshold (see
    :meth:`Store.vacuum_live_tables`). ``conn`` must not be in a transaction."""
    found = await conn.fetch(STATS, min_dead_tuples, dead_fraction)
    if not found:
        return []
    if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", VACUUM_LOCK):
        return []  # another maintenance process is vacuuming them
    done = []
    try:
        await conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        for row in found:
            table, dead, live = row["table_name"], int(row["dead"]), int(row["live"])
            if row["running"]:
                running = "a vacuum of it is running"
                done.append(Vacuum(table, dead, live, skipped=running, busy=True))
                continue
            done.append(await _vacuum(conn, table, dead, live))
    finally:
        await conn.execute("RESET lock_timeout")
        await conn.execute("SELECT pg_advisory_unlock($1)", VACUUM_LOCK)
    return done


async def _vacuum(conn: Connection, table: str, dead: int, live: int) -> Vacuum:
    """One table, outside any transaction (a VACUUM cannot run in one). The server says
    that it skipped the table (its lock busy, or the role may not vacuum it) in a
    warning, not an error: the warnings are collected to tell the caller."""
    if table not in TABLES:  # the name goes into the statement
        raise ValueError(f"not a live table: {table!r}")
    warnings: list[str] = []
    busy = False

    def listen(_conn: Any, message: Any) -> None:
        nonlocal busy
        if getattr(message, "severity", "") in ("WARNING", "ERROR"):
            warnings.append(str(getattr(message, "message", message)))
            busy = busy or getattr(message, "sqlstate", "") == LOCK_NOT_AVAILABLE

    loop = asyncio.get_running_loop()
    started = loop.time()
    conn.add_log_listener(listen)
    try:
        await conn.execute(f"VACUUM (ANALYZE, SKIP_LOCKED, TRUNCATE false) {table}")
        await asyncio.sleep(0)  # the listener is called soon after the message arrived
    except asyncpg.LockNotAvailableError:
        return Vacuum(table, dead, live, skipped="its lock is busy", busy=True)
    finally:
        conn.remove_log_listener(listen)
    if warnings:
        return Vacuum(table, dead, live, skipped="; ".join(warnings), busy=busy)
    return Vacuum(table, dead, live, seconds=loop.time() - started)
