"""A worker's execution slots, handed out fairly across tenants (decision 0028).

A worker holds up to ``prefetch_factor`` times its concurrency in claimed runs; with
``asyncio.Semaphore`` they queued for a slot first come, first served, so a run of tenant
B claimed behind thousands of tenant A's still waited for all of them, however fair the
claim. Here each tenant waiting has its own queue, and a freed slot goes to the next
tenant in turn: B's run starts at the next free slot.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairSlots:
    """``limit`` slots; waiters are served round robin by tenant, in order within one."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        # Tenants with waiters, in the order they are served next.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @asynccontextmanager
    async def hold(self, tenant: str) -> AsyncIterator[None]:
        await self._acquire(tenant)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, tenant: str) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed over as it was cancelled: pass it on
            else:
                self._forget(tenant, waiter)
            raise

    def _forget(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]

    def _release(self) -> None:
        """Hand the slot to the first waiter of the next tenant in turn, or free it."""
        while self._waiting:
            tenant, queue = next(iter(self._waiting.items()))
            waiter = queue.popleft()
            if queue:
                self._waiting.move_to_end(tenant)  # its next waiter goes after the others
            else:
                del self._waiting[tenant]
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1
