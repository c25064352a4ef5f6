"""Shard ownership: how many schedulers split the job space between them.

Each job belongs to shard ``shard_key(job_id) % shard_count``. Every scheduler announces
itself (the process registry, under the reserved tenant ``@scheduler``), counts the live
ones, and keeps its fair share of the shards leased: the ones it prefers first (shard
``s`` is preferred by the member at position ``s % members``), then any free or expired
one. It releases what exceeds its share, so shards move to a newcomer within one renewal
and a dead scheduler's shards are taken over once their leases expire. Every write it
makes for a shard carries the shard's epoch (:class:`~cronwheel.core.model.ShardGuard`).
"""

from __future__ import annotations

import logging
import math
import os
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from cronwheel.core.clock import Clock
from cronwheel.core.model import SCHEDULER_TENANT, ShardGuard, WorkerInfo, new_id
from cronwheel.store.base import Leases, Registry

log = logging.getLogger("cronwheel.shards")


class ShardStore(Leases, Registry, Protocol):
    """What shard ownership needs of a store: the leases, and the registry that says how
    many schedulers are alive."""


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    shard_count: int = 64
    lease_seconds: float = 10.0
    """A dead scheduler's shards are taken over at most this long (plus one renewal)
    after its last renewal."""
    renew_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.shard_count < 1:
            raise ValueError("shard_count: must be at least 1")
        if self.renew_seconds * 3 > self.lease_seconds:
            raise ValueError("renew_seconds: must be at most a third of lease_seconds")


class ShardOwner:
    """Keeps one scheduler's share of the shards leased; :attr:`guard` is what it owns."""

    def __init__(
        self, store: ShardStore, clock: Clock, config: ShardingConfig, holder: str | None = None
    ) -> None:
        self.store = store
        self.clock = clock
        self.config = config
        self.holder = holder or f"scheduler-{socket.gethostname()}-{os.getpid()}-{new_id()[-6:]}"
        self.guard = ShardGuard(self.holder, {}, config.shard_count)
        self._started = clock.now()

    async def rebalance(self) -> ShardGuard:
        """Announce this scheduler, then renew, release and take shards to its share."""
        now = self.clock.now()
        await self.store.register_worker(self._announcement())
        seen_since = now - _seconds(self.config.lease_seconds)
        members = sorted(
            w.id for w in await self.store.list_workers(SCHEDULER_TENANT, seen_since=seen_since)
        )
        members = members if self.holder in members else sorted([*members, self.holder])
        share = math.ceil(self.config.shard_count / len(members))
        leases = await self.store.list_shard_leases()
        taken = {
            lease.shard
            for lease in leases
            if lease.holder not in (None, self.holder)
            and lease.expires_at
            and lease.expires_at > now
        }
        mine = sorted(lease.shard for lease in leases if lease.holder == self.holder)
        keep, extra = mine[:share], mine[share:]
        if extra:
            await self.store.release_shards(self.holder, extra)
        wanted = keep + self._candidates(members, taken, set(mine), share - len(keep))
        got = await self.store.acquire_shards(
            self.holder, wanted, now=now, ttl_seconds=self.config.lease_seconds
        )
        previous = set(self.guard.epochs)
        self.guard = ShardGuard(
            self.holder, {lease.shard: lease.epoch for lease in got}, self.config.shard_count
        )
        if set(self.guard.epochs) != previous:
            log.info(
                "%s owns %d of %d shards (%d schedulers)",
                self.holder,
                len(got),
                self.config.shard_count,
                len(members),
            )
        return self.guard

    def _candidates(
        self, members: list[str], taken: set[int], mine: set[int], room: int
    ) -> list[int]:
        if room <= 0:
            return []
        me = members.index(self.holder)
        free = [s for s in range(self.config.shard_count) if s not in taken and s not in mine]
        free.sort(key=lambda s: (s % len(members) != me, s))  # my preferred shards first
        return free[:room]

    async def stop(self) -> None:
        """Hand the shards back at once, so the others take them without waiting."""
        await self.store.release_shards(self.holder, list(self.guard.epochs))
        await self.store.remove_worker(self.holder)
        self.guard = ShardGuard(self.holder, {}, self.config.shard_count)

    def _announcement(self) -> WorkerInfo:
        return WorkerInfo(
            id=self.holder,
            tenant_id=SCHEDULER_TENANT,
            host=socket.gethostname(),
            pools=(),
            capacity=0,
            in_flight=len(self.guard.epochs),
            started_at=self._started,
            last_seen_at=self.clock.now(),
        )


def _seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
