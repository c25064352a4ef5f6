"""Tenant quotas, held for the whole cluster by the store (decision 0027):

* ``max_jobs`` (live jobs): checked by the store inside the create's own transaction,
  with the tenant's row locked, so concurrent creates in any number of API processes
  never take a tenant past it (:meth:`~cronwheel.store.base.Store.create_jobs`).
* ``max_creates_per_second``: a token bucket per tenant kept in the tenants table; each
  request that creates runs or jobs takes all its tokens in one statement
  (:meth:`~cronwheel.store.base.Store.take_create_tokens`), before anything is written.
  Jobs created (one or a batch), runs triggered, enqueued, replayed and backfilled all
  draw on it; runs are not jobs, so ``max_jobs`` does not count them.

Both answer 429 with ``Retry-After`` and a ``field`` naming the limit, and nothing of a
refused request is written. Tokens taken by a request that then fails for another reason
(a name conflict, ``max_jobs``) stay spent: a client that retries a refused request in a
loop is held to the rate as well.

Which tenants have a rate is cached per process for :data:`TENANT_TTL` seconds, so a
tenant without one costs no store round trip per create; a rate an admin sets reaches
the process that set it at once and every other process within that time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cronwheel.core.clock import Clock
from cronwheel.core.model import Tenant
from cronwheel.errors import OverLimit
from cronwheel.store.base import Store

TENANT_TTL = 5.0
"""Seconds a tenant's quotas are cached: a quota change reaches every API process soon."""


@dataclass(frozen=True, slots=True)
class TenantDefaults:
    """The limits a tenant gets when ``POST /v1/tenants`` leaves them out (an explicit
    ``null`` there means no limit). Set by the operator (``cronwheel api
    --tenant-max-jobs/--tenant-max-creates-per-second``); by default none: a tenant is
    unlimited until an admin limits it."""

    max_jobs: int | None = None
    max_creates_per_second: float | None = None


MAX_RETRY_AFTER = 86_400
"""The longest Retry-After a 429 gives (seconds)."""


@dataclass
class Quotas:
    """One per app: the cache of tenants' rates in front of the store's bucket."""

    store: Store
    clock: Clock
    monotonic: Callable[[], float] = time.monotonic
    _tenants: dict[str, tuple[float, Tenant | None]] = field(default_factory=dict)

    async def admit(self, tenant_id: str, count: int) -> None:
        """Take ``count`` tokens for new jobs, or raise OverLimit (429). ``max_jobs`` is
        the store's to check, as it writes them."""
        await self._take(tenant_id, count)

    async def admit_runs(self, tenant_id: str, count: int) -> None:
        """Take ``count`` tokens for runs created (triggered, enqueued, replayed,
        backfilled), or raise OverLimit (429)."""
        await self._take(tenant_id, count)

    def forget(self, tenant_id: str) -> None:
        """Drop the cached quotas of a tenant (its quotas just changed here)."""
        self._tenants.pop(tenant_id, None)

    async def _tenant(self, tenant_id: str) -> Tenant | None:
        now = self.monotonic()
        cached = self._tenants.get(tenant_id)
        if cached is not None and now - cached[0] < TENANT_TTL:
            return cached[1]
        tenant = await self.store.get_tenant(tenant_id)
        self._tenants[tenant_id] = (now, tenant)
        return tenant

    async def _take(self, tenant_id: str, count: int) -> None:
        tenant = await self._tenant(tenant_id)
        if count <= 0 or tenant is None or tenant.max_creates_per_second is None:
            return
        took = await self.store.take_create_tokens(tenant_id, count, now=self.clock.now())
        if took.granted or took.rate is None:
            return
        # A rate as small as a float allows (5e-324 per second) makes the wait infinite:
        # a day is as good an answer, and ceil(inf) would be an error, not a 429.
        wait = max(math.ceil(min(took.retry_after, MAX_RETRY_AFTER)), 1)
        raise OverLimit(
            "max_creates_per_second",
            f"the tenant may create {took.rate:g} jobs and runs per second, all API"
            f" processes together; {count} more now would be over: retry in {wait} s",
            wait,
        )
