"""``GET /metrics``: Prometheus text, open like ``/healthz`` (docs/observability.md,
decision 0019-metrics): aggregate counts with bounded labels, no ids, no secrets."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from cronwheel.observability.metrics import ApiMetrics

router = APIRouter(tags=["health"])


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    exporter: ApiMetrics = request.app.state.metrics
    return Response(await exporter.render(), media_type=CONTENT_TYPE_LATEST)
