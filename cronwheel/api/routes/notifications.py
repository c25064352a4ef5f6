"""``/v1/notifications``: a tenant's completion notifications, their dead letter, and
replaying it (docs/workflows.md#notifications)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import NotificationReplayIn
from cronwheel.api.openapi import problems
from cronwheel.core.model import NotificationState
from cronwheel.web.auth import Reader, Writer
from cronwheel.web.pagination import DEFAULT_LIMIT, Cursor, Limit, before_id, page
from cronwheel.web.schemas import NotificationOut, Page, ReplayedOut, dump
from cronwheel.web.state import api_state

router = APIRouter(tags=["notifications"], route_class=GuardedRoute)


@router.get(
    "/v1/notifications",
    response_model=Page[NotificationOut],
    responses=problems(),
    summary="Notifications, newest first",
)
async def list_notifications(
    request: Request,
    principal: Reader,
    state: NotificationState | None = None,
    cursor: Cursor = None,
    limit: Limit = DEFAULT_LIMIT,
) -> Any:
    """Every event of the tenant's runs written for a notification target; with
    ``state=dead``, the ones that kept failing (the notifications' dead letter)."""
    store = api_state(request).service(principal).store
    found = await store.list_notifications(
        principal.tenant_id,
        state=state,
        before_id=before_id("notification", cursor),
        limit=limit + 1,
    )
    items, next_cursor = page(found, limit, "notification", "id")
    return {"items": [dump(NotificationOut.of(n)) for n in items], "next_cursor": next_cursor}


@router.post(
    "/v1/notifications/replay",
    response_model=ReplayedOut,
    responses=problems(),
    summary="Deliver dead notifications again",
)
async def replay_notifications(
    body: NotificationReplayIn, request: Request, principal: Writer
) -> Any:
    """Dead notifications back to pending, due now, with a fresh count of tries (the same
    event id). Ids that are not dead (or not this tenant's) are left alone and not
    listed."""
    state = api_state(request)
    store = state.service(principal).store
    now = await store.now()
    return {"replayed": await store.replay_notifications(principal.tenant_id, body.ids, now=now)}
