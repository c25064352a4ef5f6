"""Wake-ups across processes: one dedicated LISTEN connection per store.

A pooled connection cannot LISTEN (it goes back to the pool and to other users), so the
store keeps one connection of its own, opened at the first wait and kept. Each topic is
LISTENed once, at its first wait, and stays subscribed.

A notification wakes every coroutine waiting on its topic. One that arrives while nobody
waits sets a flag that the next wait on the topic consumes: a worker that is busy between
two waits when work arrives must not sleep a whole timeout afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

MAX_CHANNEL_BYTES = 63


def channel(topic: str) -> str:
    """The PostgreSQL channel of ``topic``: itself, or the md5 of one too long for an
    identifier. Mirrors ``_sql._CHANNEL``, which names the channels notifications use."""
    if len(topic.encode()) <= MAX_CHANNEL_BYTES:
        return topic
    return "cw:" + hashlib.md5(topic.encode(), usedforsecurity=False).hexdigest()


Connect = Callable[[], Awaitable["asyncpg.Connection[asyncpg.Record]"]]


class Listener:
    """Waits for notifications on any set of topics, over one LISTEN connection."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._conn: asyncpg.Connection[asyncpg.Record] | None = None
        self._lock = asyncio.Lock()
        self._topics: set[str] = set()
        self._flags: set[str] = set()
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._closed = False

    async def wait(self, topics: Sequence[str], timeout: float) -> bool:
        """True as soon as one of ``topics`` is notified (or was, since the last wait)."""
        topics = [channel(t) for t in topics]
        await self._listen(topics)
        if self._consume(topics):
            return True
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(woken)
        try:
            done, _ = await asyncio.wait({woken}, timeout=timeout)
        finally:
            for topic in topics:
                self._waiters.get(topic, set()).discard(woken)
            woken.cancel()
        return bool(done)

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        self._wake_all()
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=5)

    async def _listen(self, topics: Sequence[str]) -> None:
        if self._conn is not None and self._topics.issuperset(topics):
            return
        async with self._lock:
            if self._closed:
                raise RuntimeError("the PostgreSQL store is closed")
            if self._conn is None:
                self._conn = await self._open()
            for topic in topics:
                if topic not in self._topics:
                    await self._conn.add_listener(topic, self._on_notification)
                    self._topics.add(topic)

    async def _open(self) -> asyncpg.Connection[asyncpg.Record]:
        conn = await self._connect()
        conn.add_termination_listener(self._on_termination)
        for topic in self._topics:
            await conn.add_listener(topic, self._on_notification)
        return conn

    def _consume(self, topics: Sequence[str]) -> bool:
        hit = self._flags.intersection(topics)
        self._flags.difference_update(hit)
        return bool(hit)

    def _on_notification(self, _conn: Any, _pid: int, channel: str, _payload: object) -> None:
        waiters = [w for w in self._waiters.get(channel, ()) if not w.done()]
        if not waiters:
            self._flags.add(channel)
        for waiter in waiters:
            waiter.set_result(None)

    def _on_termination(self, conn: Any) -> None:
        # Notifications sent while the connection is down are lost: wake every waiter so
        # it polls, and reconnect (re-LISTENing every topic) at the next wait.
        if conn is self._conn:
            self._conn = None
        self._wake_all()

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
