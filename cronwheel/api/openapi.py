"""``/openapi.json``: the documented error answers of every operation, as they are sent
(``application/problem+json``), so that the document is an accurate contract."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from cronwheel.core.ids import INT64
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
            _as_enforced(schema)
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


NUL_FREE = r"^[^\x00\ud800-\udfff]*$"
"""Every string the API takes: RequestGuard refuses a NUL character (PostgreSQL text
cannot hold one) or a lone surrogate (UTF-8 cannot encode one), in a URL or anywhere in
a JSON body, keys included."""
INT64_END = 2**63
"""Run ids and the like go up to 2**63 - 1. The document says ``exclusiveMaximum: 2**63``
rather than ``maximum: 2**63 - 1``: a client that reads JSON numbers as doubles (most
do) reads 2**63 - 1 as 2**63 and would send what the server refuses; 2**63 is a double
exactly, so "below it" means the same to every reader."""
INT32_MAX = 2**31 - 1
JSON_VALUE = "JsonValue"
_ANY_KEYS = frozenset({"title", "description", "default", "examples"})
"""A property schema with nothing but these keys says "any JSON value"."""
_REQUIRED_HEADERS = frozenset({"if-match"})
"""Headers a route treats as required with its own status (If-Match: 428), which FastAPI
must see as optional to let it."""


def _as_enforced(schema: dict[str, Any]) -> None:
    """Make the document say what the server enforces where pydantic and FastAPI leave it
    looser (decision 0045): strings without NUL, integers within what a store column and
    a double hold, any-JSON values whose strings and keys are NUL-free, If-Match required."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    ref = {"$ref": f"#/components/schemas/{JSON_VALUE}"}
    components[JSON_VALUE] = {
        "description": (
            "Any JSON value: its strings and keys hold no NUL character or lone surrogate,"
            " and it nests at most 64 levels deep."
        ),
        "anyOf": [
            {"type": "null"},
            {"type": "boolean"},
            {"type": "number"},
            {"type": "string", "pattern": NUL_FREE},
            {"type": "array", "items": ref},
            {"type": "object", "propertyNames": {"pattern": NUL_FREE}, "additionalProperties": ref},
        ],
    }
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                # A URL or a header cannot say null: an optional one is left out.
                parameter["schema"] = _without_null(parameter["schema"])
                if parameter["name"].lower() in _REQUIRED_HEADERS:
                    parameter["required"] = True
    _walk(schema, ref)


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, null]`` as X (with the outer title and description)."""
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if len(options) != 1:
        return schema
    outer = {k: v for k, v in schema.items() if k not in {"anyOf", "default"}}
    return {**options[0], **outer}


def _walk(node: Any, any_json: dict[str, Any]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, any_json)
        return
    if not isinstance(node, dict):
        return
    kind = node.get("type")
    if kind == "integer":
        _integer(node)
    elif kind == "string" and not {"pattern", "enum", "const", "format"} & node.keys():
        node["pattern"] = NUL_FREE
    for key in ("properties",):
        for name, child in node.get(key, {}).items():
            if isinstance(child, dict) and child.keys() <= _ANY_KEYS:
                node[key][name] = {**child, **any_json}
    if node.get("additionalProperties") is True and node.get("type") == "object":
        node["propertyNames"] = {"pattern": NUL_FREE}
        node["additionalProperties"] = any_json
    for value in node.values():
        _walk(value, any_json)


def _integer(node: dict[str, Any]) -> None:
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(node.get(key), float) and node[key].is_integer():
            node[key] = int(node[key])
    if node.get("maximum", 0) >= INT64:
        del node["maximum"]
        node["exclusiveMaximum"] = INT64_END
    small = (
        node.get("minimum", -INT64) >= -INT32_MAX - 1 and node.get("maximum", INT64) <= INT32_MAX
    )
    node.setdefault("format", "int32" if small else "int64")
