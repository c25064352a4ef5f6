"""One SQLite connection, owned by one thread, driven from asyncio.

sqlite3 blocks; the event loop must not. Every store call is a function run on the
connection's own thread, so a whole transaction costs one hop between threads, however
many statements it holds (statements are in-process calls, not network round trips).
Several processes may share the file: WAL lets readers run beside the one writer, and
``BEGIN IMMEDIATE`` plus a busy timeout makes writers queue instead of failing.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

BUSY_TIMEOUT_MS = 30_000


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL in WAL mode survives a process crash (kill -9) without losing commits;
    # only an OS crash or power cut may lose the last transactions.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Connection:
    """A SQLite connection with a private thread; ``read``/``write`` run a function on it."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cronwheel-sqlite")
        self._conn: sqlite3.Connection | None = None

    async def open(self) -> None:
        self._conn = await self._submit(lambda: _connect(self.path))

    async def close(self) -> None:
        conn = self._conn
        if conn is not None:
            await self._submit(conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a deferred transaction: a consistent snapshot, no write lock."""
        return await self._submit(lambda: self._transaction(fn, "BEGIN"))

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` holding the database's write lock from the start, so two writers
        (threads or processes) never interleave and never deadlock on an upgrade."""
        return await self._submit(lambda: self._transaction(fn, "BEGIN IMMEDIATE"))

    def _transaction(self, fn: Callable[[sqlite3.Connection], T], begin: str) -> T:
        conn = self._conn
        if conn is None:
            raise RuntimeError("the SQLite store is closed")
        conn.execute(begin)
        try:
            result = fn(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    async def _submit(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
