"""What every request reaches through ``request.app.state.api``: one place, typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from fastapi import Request

from cronwheel.control.pipelines import PipelineService
from cronwheel.control.service import JobService
from cronwheel.core.clock import Clock
from cronwheel.security.egress import EgressPolicy
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from cronwheel.web.auth import AuthConfig, Principal
from cronwheel.web.notices import Notices
from cronwheel.web.quotas import Quotas, TenantDefaults

RATES_REFRESH = 5.0


@dataclass(frozen=True, slots=True)
class ApiState:
    store: Store
    auth: AuthConfig
    clock: Clock
    quotas: Quotas
    notices: Notices
    egress: EgressPolicy = field(default_factory=EgressPolicy)
    """Webhook URLs refused at creation (docs/security.md)."""
    tenant_defaults: TenantDefaults = field(default_factory=TenantDefaults)
    """The limits of a new tenant whose creation does not name them."""
    sealer: Sealer | None = None
    """Seals secret webhook headers (docs/security.md#secrets-at-rest); None: refused."""

    rates_read: dict[datetime, dict[str, float]] = field(default_factory=dict)
    """The rate-limited pools, by when they were read (one entry at most)."""

    async def pool_rates(self, now: datetime) -> dict[str, float]:
        """The rate-limited pools (decision 0033), read again every few seconds: a remote
        worker's claim of pools without a limit costs no statement more."""
        for at, rates in self.rates_read.items():
            if 0 <= (now - at).total_seconds() < RATES_REFRESH:
                return rates
        rates = await self.store.pool_rates()
        self.rates_read.clear()
        self.rates_read[now] = rates
        return rates

    def service(self, principal: Principal) -> JobService:
        """The application layer, acting as ``principal`` (cheap: one per request)."""
        return JobService(
            self.store,
            clock=self.clock,
            actor=principal.actor,
            egress=self.egress,
            sealer=self.sealer,
        )

    def pipelines(self, principal: Principal) -> PipelineService:
        """Pipeline definitions, acting as ``principal``."""
        return PipelineService(
            self.store,
            clock=self.clock,
            actor=principal.actor,
            egress=self.egress,
            sealer=self.sealer,
        )


def api_state(request: Request) -> ApiState:
    return cast(ApiState, request.app.state.api)
