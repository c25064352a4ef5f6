"""Tenant quotas: ``max_jobs`` (live jobs, counted in the store) and
``max_creates_per_second`` (a token bucket per tenant, in this API process).

Both are checked before a create reaches the store and answer 429 with ``Retry-After``.
Runs enqueued to a manual job take from the same bucket (each is a row the store must
write, as a job is) but are not jobs, so ``max_jobs`` does not count them.
``max_jobs`` is checked, not locked: API processes creating at the same instant may
overshoot it by their concurrent creates, which is the price of not serialising every
create of a tenant.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cronwheel.api.problems import ApiProblem
from cronwheel.model import Tenant
from cronwheel.store.base import Store

TENANT_TTL = 5.0
"""Seconds a tenant's quotas are cached: a quota change reaches every API process soon."""
FULL_RETRY_AFTER = 60
"""Retry-After (seconds) when the tenant has ``max_jobs`` live jobs: jobs end on their own
schedule, so a client is told to come back in a while rather than hammer."""


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass
class Quotas:
    """Per-process quota state; one per app."""

    store: Store
    monotonic: Callable[[], float] = time.monotonic
    _tenants: dict[str, tuple[float, Tenant | None]] = field(default_factory=dict)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    async def admit(self, tenant_id: str, count: int) -> None:
        """Allow ``count`` new jobs for the tenant, or raise a 429."""
        tenant = await self._tenant(tenant_id)
        if tenant is None:
            return
        if tenant.max_jobs is not None:
            # Counted no further than one past the quota: enough to decide, and a
            # tenant's create costs what its quota allows, not what the store holds.
            live = await self.store.count_live_jobs(tenant_id, limit=tenant.max_jobs + 1)
            if live + count > tenant.max_jobs:
                has = f"more than {tenant.max_jobs}" if live > tenant.max_jobs else str(live)
                raise _over(
                    f"the tenant has {has} live jobs; its quota is {tenant.max_jobs}",
                    FULL_RETRY_AFTER,
                )
        if tenant.max_creates_per_second is not None:
            self._take(tenant_id, tenant.max_creates_per_second, count)

    async def admit_runs(self, tenant_id: str, count: int) -> None:
        """Allow ``count`` enqueued runs for the tenant, or raise a 429."""
        tenant = await self._tenant(tenant_id)
        if tenant is not None and tenant.max_creates_per_second is not None:
            self._take(tenant_id, tenant.max_creates_per_second, count)

    def forget(self, tenant_id: str) -> None:
        """Drop the cached quotas of a tenant (its quotas just changed here)."""
        self._tenants.pop(tenant_id, None)
        self._buckets.pop(tenant_id, None)

    async def _tenant(self, tenant_id: str) -> Tenant | None:
        now = self.monotonic()
        cached = self._tenants.get(tenant_id)
        if cached is not None and now - cached[0] < TENANT_TTL:
            return cached[1]
        tenant = await self.store.get_tenant(tenant_id)
        self._tenants[tenant_id] = (now, tenant)
        return tenant

    def _take(self, tenant_id: str, rate: float, count: int) -> None:
        # The bucket holds one second of creates. A batch larger than that is let through
        # when the bucket is full and leaves it in debt, so the average rate still holds.
        capacity = max(rate, 1.0)
        now = self.monotonic()
        bucket = self._buckets.setdefault(tenant_id, _Bucket(capacity, now))
        bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at) * rate)
        bucket.at = now
        needed = min(float(count), capacity)
        if bucket.tokens < needed:
            wait = max(math.ceil((needed - bucket.tokens) / rate), 1)
            raise _over(
                f"the tenant may create {rate:g} jobs and enqueued runs per second, together"
                f" (max_creates_per_second): retry in {wait} s",
                wait,
            )
        bucket.tokens -= count


def _over(detail: str, retry_after: int) -> ApiProblem:
    return ApiProblem(429, detail, headers={"Retry-After": str(retry_after)})
