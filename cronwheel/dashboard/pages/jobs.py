"""The jobs pages (being built: issue 15)."""

from __future__ import annotations

from fastapi import APIRouter

from cronwheel.dashboard.render import PageRoute

router = APIRouter(route_class=PageRoute, include_in_schema=False)
