"""Wires the dashboard into the API app: its pages, its static files, sign-in and out."""

from __future__ import annotations

from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import FileResponse, RedirectResponse

from cronwheel.dashboard import session
from cronwheel.dashboard.live import SharedReads
from cronwheel.dashboard.minutes import SettledMinutes
from cronwheel.dashboard.pages import admin, jobform, jobs, overview, pipelines, runs, workers
from cronwheel.web.problems import ApiProblem

UI = "/ui"
STATIC: dict[str, str] = {
    "ui.css": "text/css; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "jobform.js": "text/javascript; charset=utf-8",
    "admin.js": "text/javascript; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
"""Every file the pages load, with its type: all of it ships in the package (no CDN)."""


def install(app: FastAPI) -> None:
    """Serve the dashboard at ``/ui`` from ``app``, which has the API's state."""
    folder = files("cronwheel.dashboard") / "static"
    app.state.dashboard_reads = SharedReads()
    app.state.dashboard_minutes = SettledMinutes()

    @app.get(UI + "/static/{name}", include_in_schema=False)
    async def static(name: str) -> FileResponse:
        media_type = STATIC.get(name)
        if media_type is None:
            raise ApiProblem(404, f"no dashboard file named {name!r}")
        return FileResponse(
            str(folder / name),
            media_type=media_type,
            headers={"Cache-Control": "public, max-age=300"},
        )

    @app.get(UI, include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(UI + "/", status_code=307)

    @app.get("/", include_in_schema=False)
    async def site_root() -> RedirectResponse:
        """The server's address in a browser leads to the dashboard."""
        return RedirectResponse(UI + "/", status_code=307)

    app.include_router(session.router)
    # jobform before jobs: /ui/jobs/new must not be read as the page of a job "new".
    for module in (overview, jobform, jobs, runs, pipelines, workers, admin):
        app.include_router(module.router)
