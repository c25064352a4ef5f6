"""Wake-ups across processes: one dedicated LISTEN connection per store.

A pooled connection cannot LISTEN (it goes back to the pool and to other users), so the
store keeps one connection of its own, opened at the first wait and kept. Each topic is
LISTENed once, at its first wait, and stays subscribed.

A notification wakes every coroutine waiting on its topic. One that arrives while nobody
waits sets a flag that the next wait on the topic consumes: a worker that is busy between
two waits when work arrives must not sleep a whole timeout afterwards.

A notification's payload may name the tenant whose runs it announces (an enqueue's does):
the tenants named since the last :meth:`Listener.take_tenants` are kept, so that a
worker's peek claims for them alone, a cheap one-tenant claim beside another tenant's
backlog (decision 0037). One without a name, or more tenants than
:data:`MAX_TOLD_TENANTS`, makes the answer "anyone's".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

MAX_CHANNEL_BYTES = 63

MAX_TOLD_TENANTS = 8
"""The most tenants kept per channel between two takes: past it a peek claims for every
tenant anyway (one fair claim is cheaper than many one-tenant ones), and a stream of
enqueues by many tenants cannot grow the set."""


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
        # Per channel, the tenants its notifications named since the last take; None:
        # one named nobody (anyone's runs).
        self._told: dict[str, set[str] | None] = {}
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

    def take_tenants(self, topics: Sequence[str]) -> frozenset[str] | None:
        """The tenants the notifications of ``topics`` named since the last take, and
        forget them; None when one named nobody, or none came (a wait woken by a lost
        connection or a timeout), or more than :data:`MAX_TOLD_TENANTS` were named."""
        named: set[str] = set()
        anyone = False
        came = False
        for topic in topics:
            key = channel(topic)
            if key not in self._told:
                continue
            came = True
            told = self._told.pop(key)
            if told is None:
                anyone = True
            else:
                named |= told
        if anyone or not came or len(named) > MAX_TOLD_TENANTS:
            return None
        return frozenset(named)

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

    def _on_notification(self, _conn: Any, _pid: int, channel: str, payload: object) -> None:
        told = self._told.setdefault(channel, set())
        if told is not None and payload not in told:
            if isinstance(payload, str) and payload and len(told) < MAX_TOLD_TENANTS:
                told.add(payload)
            else:
                self._told[channel] = None  # anyone's runs
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
        self._told.clear()  # notifications may have been lost: the next take is anyone's
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
