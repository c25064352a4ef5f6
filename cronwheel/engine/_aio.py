"""Small asyncio helpers the long-running services share."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to ``seconds``; return True at once if ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=max(seconds, 0.0))
    return stop.is_set()


async def first_of(*awaitables: Awaitable[Any]) -> None:
    """Wait until one of ``awaitables`` finishes, then cancel the rest."""
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
