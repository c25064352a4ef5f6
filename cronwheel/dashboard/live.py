"""What live parts of pages read, shared: one read per key per second, whatever the
number of tabs that poll it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from fastapi import Request

TTL_SECONDS = 1.0
MAX_KEYS = 1024
"""Tenants with a tab open at once: past this, the oldest entries are forgotten."""


class SharedReads:
    """A read (e.g. the overview of a tenant) done at most once per :data:`TTL_SECONDS`
    per key; callers in the meantime get the same answer, and callers that arrive while
    it is being read wait for it instead of reading again.

    A read given a ``cost_factor`` is kept for ``cost_factor`` times as long as it took,
    if that is longer than the TTL: a count over ten million jobs that takes 1.5 s is not
    worth repeating every second for a number that barely moves."""

    def __init__(self, ttl: float = TTL_SECONDS, clock: Callable[[], float] = time.monotonic):
        self._ttl = ttl
        self._clock = clock
        self._values: dict[str, tuple[float, Any]] = {}
        """key -> (until when it is kept, value)"""
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(
        self, key: str, read: Callable[[], Awaitable[Any]], *, cost_factor: float = 0.0
    ) -> Any:
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            hit = self._values.get(key)
            if hit is not None and self._clock() < hit[0]:
                return hit[1]
            started = self._clock()
            value = await read()
            now = self._clock()
            if len(self._values) >= MAX_KEYS:
                oldest = min(self._values, key=lambda k: self._values[k][0])
                del self._values[oldest]
                self._locks.pop(oldest, None)
            self._values[key] = (now + max(self._ttl, cost_factor * (now - started)), value)
            return value


def shared_reads(request: Request) -> SharedReads:
    """The app's shared reads: one cache per API app (so per store), for every page."""
    return cast(SharedReads, request.app.state.dashboard_reads)
