"""Lists and history from a read replica, within a bounded staleness (decision 0030).

:class:`ReplicaReads` is a :class:`Store` over a PostgreSQL primary and one streaming
standby. Every method goes to the primary, except the list and history reads of
:data:`ROUTED` (the :class:`~cronwheel.store.base.History` seam), and those only while
:func:`stale_reads` is on (the API turns it on for GET and HEAD requests,
cronwheel/api/app.py): a write, and anything a write reads first
(``trigger`` reads its new run back with ``list_runs``), never sees the replica. A routed
read goes to the replica while its replay lag is within ``max_lag``, measured at most
every ``check_every`` seconds; otherwise, or when the replica fails, to the primary.

Methods added to :class:`Store` later are forwarded to the primary without a change
here: the primary is never wrong, and a new read reaches the replica only once it is
declared in the ``History`` seam.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import contextvars
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from cronwheel.core.clock import Clock, SystemClock
from cronwheel.errors import InvalidInput
from cronwheel.observability import metrics
from cronwheel.security.redact import mask_url
from cronwheel.store.base import History, Store

if TYPE_CHECKING:  # imported when a replica is opened: the API over SQLite never loads asyncpg
    from cronwheel.store.postgres import PostgresStore

log = logging.getLogger("cronwheel.store.replica")

ROUTED: Final = frozenset(
    name for name, member in vars(History).items() if not name.startswith("_") and callable(member)
)
"""The reads that may be served by the replica: the :class:`~cronwheel.store.base.History`
seam, by type, so that a read is routed by being declared there and nowhere else. Not
there, on purpose: single-item reads (``get_job``, ``get_run``: a detail page and every
write's read-before-write), anything authentication or authorisation reads
(``find_api_key``, ``get_tenant``, ``list_api_keys``: a revoked key must stop working at
once), the idempotency table (``get_response``), quotas, workers, shard leases, gauges and
status (operations want them live)."""

DEFAULT_MAX_LAG: Final = 5.0
CHECK_EVERY: Final = 1.0
"""Seconds between two measures of the replica's lag (at most one a second by default)."""
PROBE_TIMEOUT: Final = 2.0
"""A lag measure that takes longer counts as a replica that does not answer."""

_stale_reads: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "cronwheel_stale_reads", default=False
)


@contextlib.contextmanager
def stale_reads() -> Iterator[None]:
    """Within this block (and the tasks it starts), :data:`ROUTED` reads may come from
    the replica: for requests that only read and show what they read."""
    token = _stale_reads.set(True)
    try:
        yield
    finally:
        _stale_reads.reset(token)


class ReplicaReads(Store):
    """A primary and a read replica, as one store. Open it with :meth:`open`."""

    def __init__(
        self,
        primary: PostgresStore,
        replica: PostgresStore,
        *,
        max_lag: float = DEFAULT_MAX_LAG,
        check_every: float = CHECK_EVERY,
        clock: Clock | None = None,
        where: str = "the read replica",
    ) -> None:
        self.primary = primary
        self.replica = replica
        self.capabilities = primary.capabilities
        self.max_lag = max_lag
        self._check_every = timedelta(seconds=check_every)
        self._clock = clock or SystemClock()
        self._where = where
        self._checked_at: datetime | None = None
        self._probe: asyncio.Future[None] | None = None
        self.lag: float | None = None
        """The lag at the last check: None when unknown (no answer, or not a standby)."""
        self.served_by = "primary_unmeasured"
        """Where routed reads go now: ``replica`` or ``primary_<reason>``."""

    @classmethod
    async def open(
        cls,
        primary: Store,
        replica_url: str,
        *,
        max_lag: float = DEFAULT_MAX_LAG,
        check_every: float = CHECK_EVERY,
        clock: Clock | None = None,
    ) -> ReplicaReads:
        """The replica at ``replica_url`` opened read-only beside ``primary`` (a
        PostgreSQL store). The replica may be down now: reads use the primary until it
        answers, and the API starts anyway."""
        from cronwheel.store.postgres import PostgresStore

        if not isinstance(primary, PostgresStore):
            raise InvalidInput(
                "read_replica",
                "needs a PostgreSQL store: an SQLite file has no replicas (drop --read-replica)",
            )
        if not replica_url.startswith(("postgresql://", "postgres://")):
            raise InvalidInput(
                "read_replica",
                f"{mask_url(replica_url)!r} is not a PostgreSQL URL:"
                " use postgresql://user@host:5432/dbname",
            )
        if not (max_lag >= 0 and math.isfinite(max_lag)):
            raise InvalidInput("max_replica_lag", f"must be a number of seconds ≥ 0, not {max_lag}")
        # min_size=0: opening connects nowhere, so a replica down at start-up only means
        # the primary serves every read until it answers.
        replica = await PostgresStore.connect(replica_url, min_size=0, read_only=True)
        return cls(
            primary,
            replica,
            max_lag=max_lag,
            check_every=check_every,
            clock=clock,
            where=f"the read replica {mask_url(replica_url)}",
        )

    async def close(self) -> None:
        probe = self._probe
        if probe is not None:
            probe.cancel()
            with contextlib.suppress(BaseException):
                await probe
        try:
            await self.replica.close()
        finally:
            await self.primary.close()

    # -- routing -----------------------------------------------------------------------
    async def reader(self) -> Store:
        """The store a :data:`ROUTED` read goes to now (the primary outside
        :func:`stale_reads`)."""
        if not _stale_reads.get():
            return self.primary
        now = self._clock.now()
        checked = self._checked_at
        if checked is None or not checked <= now < checked + self._check_every:
            if self._probe is None:
                self._probe = asyncio.ensure_future(self._check())
            # Shared by every request that arrives meanwhile; shielded, so a client that
            # goes away does not cancel the others' measure.
            await asyncio.shield(self._probe)
        return self.replica if self.served_by == "replica" else self.primary

    async def _check(self) -> None:
        try:
            try:
                position = await self.primary.wal_position()
                lag = await asyncio.wait_for(self.replica.replay_lag(position), PROBE_TIMEOUT)
            except TimeoutError:
                self._observe(None, "primary_unreachable", f"no answer within {PROBE_TIMEOUT:g} s")
            except Exception as exc:  # down, refused, not migrated: the primary serves
                self._observe(None, "primary_unreachable", str(exc))
            else:
                if lag is None:
                    self._observe(None, "primary_unmeasured", "it is not a standby")
                elif lag > self.max_lag:
                    self._observe(lag, "primary_lagging", "")
                else:
                    self._observe(lag, "replica", "")
        finally:
            self._checked_at = self._clock.now()
            self._probe = None

    def _observe(self, lag: float | None, served_by: str, why: str) -> None:
        self.lag = lag
        metrics.default().replica_lag(lag)
        if served_by == self.served_by:
            return
        self.served_by = served_by
        if served_by == "replica":
            log.info("%s is %.3f s behind: lists and history read from it", self._where, lag)
        elif served_by == "primary_lagging":
            log.warning(
                "%s is %.1f s behind (more than --max-replica-lag %g s):"
                " lists and history read from the primary",
                self._where,
                lag,
                self.max_lag,
            )
        else:
            log.warning(
                "%s is not usable (%s): lists and history read from the primary", self._where, why
            )

    async def routed(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call the read ``method`` where :meth:`reader` says; a replica that fails under it
        hands the read to the primary and is measured again at the next read."""
        store = await self.reader()
        if store is self.replica:
            try:
                found = await getattr(self.replica, method)(*args, **kwargs)
            except Exception as exc:
                # Down since the last measure, or a query the standby cancelled (a
                # conflict with recovery): the primary answers this one, and the replica
                # is measured again at the next read. A bug fails on the primary too.
                self._observe(None, "primary_unreachable", str(exc))
                self._checked_at = None
            else:
                metrics.default().replica_read("replica")
                return found
        if _stale_reads.get():
            metrics.default().replica_read(self.served_by)
        return await getattr(self.primary, method)(*args, **kwargs)


def _forward(name: str) -> Callable[..., Awaitable[Any]]:
    async def forward(self: ReplicaReads, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.primary, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


def _route(name: str) -> Callable[..., Awaitable[Any]]:
    async def route(self: ReplicaReads, *args: Any, **kwargs: Any) -> Any:
        return await self.routed(name, *args, **kwargs)

    route.__name__ = route.__qualname__ = name
    return route


def _complete() -> None:
    """Give :class:`ReplicaReads` every :class:`Store` method it does not write itself."""
    unknown = ROUTED - Store.__abstractmethods__
    if unknown:
        raise TypeError(f"ROUTED names methods Store does not have: {sorted(unknown)}")
    for name in ReplicaReads.__abstractmethods__:
        if not inspect.iscoroutinefunction(getattr(Store, name)):
            raise TypeError(f"Store.{name} is not a coroutine: forward it by hand")
        setattr(ReplicaReads, name, (_route if name in ROUTED else _forward)(name))
    # Typed loosely: mypy still sees the class as abstract (it cannot follow setattr).
    completed: type[Any] = ReplicaReads
    abc.update_abstractmethods(completed)


_complete()

__all__ = ["DEFAULT_MAX_LAG", "ROUTED", "ReplicaReads", "stale_reads"]
