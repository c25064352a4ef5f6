"""``/openapi.json``: the documented error answers of every operation, as they are sent
(``application/problem+json``), so that the document is an accurate contract."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from cronwheel.web.problems import KINDS, PROBLEM_JSON
from cronwheel.web.schemas import ProblemOut

COMMON = (400, 401, 403, 413, 415, 422, 503)
"""What any ``/v1`` operation may answer: a bad URL or body, no or a weak token, a body
over the size limit or not in UTF-8, a bad parameter, the store down."""


def problems(*statuses: int, common: bool = True) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: its error statuses, each a problem."""
    wanted = sorted({*statuses, *(COMMON if common else ())})
    return {s: {"model": ProblemOut, "description": KINDS[s][1]} for s in wanted}


def install(app: FastAPI) -> None:
    """Serve the schema with problem responses under their real media type."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            _problem_media_type(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = build  # type: ignore[method-assign]


def _problem_media_type(schema: dict[str, Any]) -> None:
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status.isdigit() and int(status) >= 400 and "application/json" in content:
                    content[PROBLEM_JSON] = content.pop("application/json")
