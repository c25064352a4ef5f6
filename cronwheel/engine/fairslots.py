"""A worker's execution slots, handed out fairly across tenants (decision 0028), and the
connection lanes webhook runs also need (decision 0036).

A worker holds claimed runs beyond those executing; with ``asyncio.Semaphore`` they
queued for a slot first come, first served, so a run of tenant B claimed behind thousands
of tenant A's still waited for all of them, however fair the claim. Here each tenant
waiting has its own queue, and a freed slot goes to the next tenant in turn: B's run
starts at the next free slot.

A webhook run needs a connection as well as a slot. The worker's HTTP client can open so
many connections in all, and so many to one target: a run waits for its *lane* (its
target's origin) here, holding nothing, instead of inside the HTTP client, where a
queue of thousands made every request event scan every queued request (the worker froze,
issue 26). A run whose target is at its limit does not hold a slot while it waits: one
slow or busy target cannot take every slot of a pool, and the runs behind it for other
targets go ahead.
"""

from __future__ import annotations

import asyncio
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

Lane = str | None
"""A webhook's target origin (``https://host:443``), or None for a run that needs no
connection (a Python handler)."""


class Lanes:
    """The connections a worker's webhooks may hold: ``total`` in all, ``per_lane`` to one
    target. Shared by every pool's :class:`FairSlots` of a worker, since the pools share
    one HTTP client."""

    def __init__(self, total: int, per_lane: int) -> None:
        if total < 1 or per_lane < 1:
            raise ValueError("lanes: total and per_lane must be at least 1")
        self.total = total
        self.per_lane = min(per_lane, total)
        self.used = 0
        self._in_use: Counter[str] = Counter()
        self._pools: list[FairSlots] = []

    def in_use(self, lane: str) -> int:
        return self._in_use[lane]

    def has_room(self, lane: Lane) -> bool:
        if lane is None:
            return True
        return self.used < self.total and self._in_use[lane] < self.per_lane

    def _take(self, lane: Lane) -> None:
        if lane is not None:
            self.used += 1
            self._in_use[lane] += 1

    def _give(self, lane: str) -> None:
        self.used -= 1
        left = self._in_use[lane] - 1
        if left:
            self._in_use[lane] = left
        else:
            del self._in_use[lane]
        # Any pool may have a run waiting for this lane, or for any lane (the total); the
        # pools take turns at going first, so that none starves another's webhooks.
        if len(self._pools) > 1:
            self._pools.append(self._pools.pop(0))
        for pool in self._pools:
            pool._dispatch()


class FairSlots:
    """``limit`` slots; waiters are served round robin by tenant, in order within one
    tenant's runs of a lane. A waiter with a lane is served only when its lane has room
    (see :class:`Lanes`); the others of its tenant may go first."""

    def __init__(self, limit: int, lanes: Lanes | None = None) -> None:
        self._free = limit
        self.lanes = lanes or Lanes(1, 1)
        self.lanes._pools.append(self)
        # Tenants with waiters, in the order they are served next; per tenant, its
        # waiters by lane (a lane's order is kept; lanes are tried in order of arrival).
        self._waiting: OrderedDict[str, OrderedDict[Lane, deque[asyncio.Future[None]]]] = (
            OrderedDict()
        )

    @property
    def free(self) -> int:
        return self._free

    @asynccontextmanager
    async def hold(self, tenant: str, lane: Lane = None) -> AsyncIterator[None]:
        if not self.take(lane):
            await self.acquire(tenant, lane)
        try:
            yield
        finally:
            self.release(lane)

    def take(self, lane: Lane = None) -> bool:
        """Take a slot (and the lane) if one is free and nobody waits: True if taken. The
        worker's path for most runs, with no coroutine; else :meth:`acquire`."""
        if self._free > 0 and not self._waiting and self.lanes.has_room(lane):
            self._free -= 1
            self.lanes._take(lane)
            return True
        return False

    async def acquire(self, tenant: str, lane: Lane = None) -> None:
        """Wait for a slot (and the lane), in turn by tenant; :meth:`release` gives it
        back. Cancelled while waiting, it holds nothing."""
        if self.take(lane):
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, OrderedDict()).setdefault(lane, deque()).append(waiter)
        self._dispatch()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(lane)  # handed over as it was cancelled: pass it on
            else:
                self._forget(tenant, lane, waiter)
            raise

    def _forget(self, tenant: str, lane: Lane, waiter: asyncio.Future[None]) -> None:
        lanes = self._waiting.get(tenant)
        queue = lanes.get(lane) if lanes is not None else None
        if lanes is None or queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del lanes[lane]
            if not lanes:
                del self._waiting[tenant]

    def release(self, lane: Lane = None) -> None:
        """Give back a slot (and the lane) that :meth:`take` or :meth:`acquire` gave."""
        self._free += 1
        if lane is None:
            self._dispatch()
        else:
            self.lanes._give(lane)  # dispatches this pool and the others

    def _dispatch(self) -> None:
        """Hand free slots to waiters: the next tenant in turn that has a waiter whose
        lane has room gets one, and goes to the back of the turn."""
        while self._free > 0 and self._waiting:
            if not self._serve_one():
                return

    def _serve_one(self) -> bool:
        for tenant, lanes in self._waiting.items():
            for lane, queue in lanes.items():
                if not self.lanes.has_room(lane):
                    continue
                waiter = queue.popleft()
                if not queue:
                    del lanes[lane]
                if lanes:
                    self._waiting.move_to_end(tenant)  # its next waiter after the others
                else:
                    del self._waiting[tenant]
                if not waiter.done():  # a cancelled waiter leaves no slot taken
                    self._free -= 1
                    self.lanes._take(lane)
                    waiter.set_result(None)
                return True
        return False
