"""The overview: how each pool is doing now and over the last hour, live."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from cronwheel.api.state import api_state
from cronwheel.dashboard.live import SharedReads
from cronwheel.dashboard.render import PageRoute, fragment, page
from cronwheel.dashboard.session import CurrentViewer, Viewer

router = APIRouter(route_class=PageRoute, include_in_schema=False)
WINDOW = timedelta(hours=1)
_reads = SharedReads()


async def _pools(request: Request, viewer: Viewer) -> dict[str, Any]:
    state = api_state(request)

    async def read() -> dict[str, Any]:
        now = state.clock.now()
        pools = await state.store.pool_status(viewer.tenant_id, now=now, since=now - WINDOW)
        return {"pools": pools, "now": now}

    result: dict[str, Any] = await _reads.get(f"overview:{viewer.tenant_id}", read)
    return result


@router.get("/ui/")
async def overview(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return page(request, viewer, "overview.html", title="Overview", **await _pools(request, viewer))


@router.get("/ui/live/overview")
async def overview_live(request: Request, viewer: CurrentViewer) -> HTMLResponse:
    return fragment("overview_live.html", **await _pools(request, viewer))
