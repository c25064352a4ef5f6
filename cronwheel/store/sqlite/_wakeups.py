"""In-process wake-ups for the embedded store: one flag per topic, set by notify.

A flag stays set until a waiter consumes it, so a notify that lands just before a wait
is not lost. Other processes sharing the file do not hear these; they poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence


class Wakeups:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}

    def _event(self, topic: str) -> asyncio.Event:
        event = self._events.get(topic)
        if event is None:
            event = self._events[topic] = asyncio.Event()
        return event

    def notify(self, topic: str) -> None:
        self._event(topic).set()

    def notify_pools(self, pools: Iterable[str]) -> None:
        for pool in set(pools):
            self.notify(f"runs:{pool}")

    async def wait(self, topics: Sequence[str], timeout: float) -> bool:
        events = [self._event(t) for t in topics]
        if not _consume(events):
            waiters = [asyncio.ensure_future(e.wait()) for e in events]
            try:
                await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
            return _consume(events)
        return True


def _consume(events: list[asyncio.Event]) -> bool:
    woken = False
    for event in events:
        if event.is_set():
            event.clear()
            woken = True
    return woken
