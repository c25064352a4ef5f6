"""``/healthz`` (the process answers) and ``/readyz`` (the store answers too)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from cronwheel.api.openapi import problems
from cronwheel.web.problems import ApiProblem
from cronwheel.web.schemas import StatusOut
from cronwheel.web.state import api_state

router = APIRouter(tags=["health"])

READY_TIMEOUT = 2.0
"""Seconds the store has to answer ``/readyz``; a load balancer must not wait longer."""


@router.get(
    "/healthz",
    response_model=StatusOut,
    responses=problems(400, 413, common=False),
    summary="Liveness",
)
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=StatusOut,
    responses=problems(400, 413, 503, common=False),
    summary="Readiness",
)
async def readyz(request: Request) -> Any:
    store = api_state(request).store
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            await store.schema_version()  # a real query: now() may not touch the store
    except Exception as exc:  # whatever the backend raises, the answer is "not ready"
        raise ApiProblem(
            503, f"the store does not answer: {type(exc).__name__}", headers={"Retry-After": "1"}
        ) from exc
    return {"status": "ready"}
