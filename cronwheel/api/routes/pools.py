"""``/v1/pool-rates``: per-pool rate limits, set by the operator (decision 0033). A pool
with a rate starts at most that many runs a second across the cluster: every worker's
claim of the pool, local or remote, takes tokens from its bucket first."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.openapi import problems
from cronwheel.web.auth import Reader, SystemAdmin
from cronwheel.web.state import api_state

router = APIRouter(tags=["admin"], route_class=GuardedRoute)

PoolName = Annotated[str, Path(pattern=r"^[A-Za-z0-9_.:-]{1,64}$", description="A pool's name.")]


class PoolRateIn(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    per_second: float | None = Field(
        gt=0,
        le=1_000_000,
        strict=True,
        description="Run starts a second across the cluster; null removes the limit.",
    )


class PoolRateOut(BaseModel):
    pool: str
    per_second: float


class PoolRatesOut(BaseModel):
    items: list[PoolRateOut]


@router.get(
    "/v1/pool-rates",
    response_model=PoolRatesOut,
    responses=problems(),
    summary="The pools' rate limits",
)
async def list_pool_rates(request: Request, principal: Reader) -> Any:
    """Every rate-limited pool (pools are shared by the tenants: every key may read
    them)."""
    rates = await api_state(request).store.pool_rates()
    return {"items": [{"pool": p, "per_second": r} for p, r in rates.items()]}


@router.put(
    "/v1/pool-rates/{pool}",
    response_model=PoolRatesOut,
    responses=problems(),
    summary="Set or remove a pool's rate limit",
)
async def set_pool_rate(
    pool: PoolName, body: PoolRateIn, request: Request, principal: SystemAdmin
) -> Any:
    """System admins only. Workers see a change within 5 s. Answers every limit."""
    state = api_state(request)
    await state.store.set_pool_rate(pool, body.per_second, now=state.clock.now())
    state.rates_read.clear()
    rates = await state.store.pool_rates()
    return {"items": [{"pool": p, "per_second": r} for p, r in rates.items()]}
