"""``/docs`` without the internet: Swagger UI's files are served from the installed
``swagger-ui-bundle-v2`` package instead of a CDN, so the page works on an isolated
network. ``/redoc`` is not offered (decision 0016)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

from cronwheel.web.problems import ApiProblem

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}
"""The files the page loads, with their content types: nothing else of the bundle (its
demo index page, source maps) is served."""
UI_PARAMETERS: dict[str, Any] = {"validatorUrl": None}
"""No badge from swagger.io's online validator: the page makes no request elsewhere."""


def install(app: FastAPI) -> None:
    """Add ``/docs`` and its assets; the app must be built with ``docs_url=None``."""
    folder = Path(str(swagger_ui_path))

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon-32x32.png",
            swagger_ui_parameters=UI_PARAMETERS,
        )

    @app.get(ASSETS_URL + "/{name}", include_in_schema=False)
    async def asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise ApiProblem(404, f"no documentation asset named {name!r}")
        return FileResponse(folder / name, media_type=media_type)
