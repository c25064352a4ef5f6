"""Every error answer is ``application/problem+json`` (RFC 9457), built here.

Route code raises :class:`ApiProblem` (or cronwheel's own errors, which map one to one);
the handlers below turn those, FastAPI's validation errors and Starlette's HTTP errors into
one shape: ``type``, ``title``, ``status``, ``detail`` and, when a field is at fault,
``field`` plus ``errors: [{"field", "reason"}]`` (``index`` too, for batch items).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from cronwheel.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    OverLimit,
    StaleVersion,
    StoreUnavailable,
)

log = logging.getLogger("cronwheel.api")

PROBLEM_JSON = "application/problem+json"
TYPE_BASE = "https://cronwheel.dev/problems/"

# status -> (type suffix, title)
KINDS: Mapping[int, tuple[str, str]] = {
    400: ("malformed", "Malformed request"),
    401: ("unauthorized", "Unauthorized"),
    403: ("forbidden", "Forbidden"),
    404: ("not-found", "Not found"),
    405: ("method-not-allowed", "Method not allowed"),
    409: ("conflict", "Conflict"),
    412: ("stale-version", "Stale version"),
    413: ("too-large", "Too large"),
    415: ("unsupported-media-type", "Unsupported media type"),
    422: ("invalid-input", "Invalid input"),
    428: ("precondition-required", "Precondition required"),
    429: ("quota", "Over quota"),
    500: ("internal", "Internal error"),
    501: ("not-implemented", "Not implemented"),
    503: ("unavailable", "Store unavailable"),
}


@dataclass(frozen=True, slots=True)
class FieldError:
    """One bad field; ``index`` places it in a batch."""

    field: str | None
    reason: str
    index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {} if self.index is None else {"index": self.index}
        return out | {"field": self.field, "reason": self.reason}


class ApiProblem(HTTPException):
    """An error answer. A subclass of Starlette's HTTPException so that FastAPI lets it
    through unchanged even when it is raised while the body is being read."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        field: str | None = None,
        errors: Sequence[FieldError] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status_code=status, detail=detail, headers=dict(headers or {}))
        self.field = field
        self.errors = list(errors)


def problem_response(
    status: int,
    detail: str,
    *,
    field: str | None = None,
    errors: Sequence[FieldError] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The problem+json answer for ``status``."""
    suffix, title = KINDS.get(status, ("error", "Error"))
    body: dict[str, Any] = {
        "type": TYPE_BASE + suffix,
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    if errors:
        body["errors"] = [e.to_dict() for e in errors]
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def invalid(field: str, reason: str) -> ApiProblem:
    """A 422 about one field."""
    field, reason = refine(field, reason)
    return ApiProblem(422, f"{field}: {reason}", field=field, errors=[FieldError(field, reason)])


# -- field names -----------------------------------------------------------------------
_UNION_TAGS = frozenset({"webhook", "handler", "publish", "command"})
_SCHEDULE_KEY = re.compile(r"^([a-z_]+): (.+)$", re.DOTALL)
_HEADER_KEY = re.compile(r"^([!#$%&'*+.^_`|~0-9A-Za-z-]+): (.+)$", re.DOTALL)


def dotted(parts: Sequence[int | str]) -> str:
    """A pydantic location as a dotted field name. Discriminated unions insert their tag
    (``action.webhook.url``); users never wrote it, so it is dropped (``action.url``)."""
    kept = [
        str(p)
        for i, p in enumerate(parts)
        if not (i > 0 and parts[i - 1] == "action" and p in _UNION_TAGS)
    ]
    return ".".join(kept)


def refine(field: str, reason: str) -> tuple[str, str]:
    """Schedule errors name their own key first (``cron: minute: 61 …``), and so do a
    webhook's header errors: move that key into the field (``schedule.cron``,
    ``action.headers.Host``), where a client can find it."""
    field = dotted(field.split("."))
    if field.rsplit(".", 1)[-1] == "schedule":
        found = _SCHEDULE_KEY.match(reason)
        if found and found.group(1) != "schedule":
            return f"{field}.{found.group(1)}", found.group(2)
    # "X-Token: given twice" → action.headers.X-Token; a command's env alike.
    if field.endswith(("action.headers", "action.env")):
        found = _HEADER_KEY.match(reason)
        if found:
            return f"{field}.{found.group(1)}", found.group(2)
    return field, reason


# -- FastAPI's validation errors -------------------------------------------------------
_BODY_SHAPE = frozenset({"missing", "model_attributes_type", "dict_type", "model_type"})
_BATCHES = frozenset({("body", "jobs"), ("body", "payloads")})
"""Lists whose length is capped: too many items is a body too large (413), not invalid."""


def from_validation(errors: Sequence[Any]) -> ApiProblem:
    """FastAPI's RequestValidationError as the problem the API documents."""
    for e in errors:
        if e["type"] == "json_invalid":
            why = (e.get("ctx") or {}).get("error", "")
            return ApiProblem(400, f"the body is not valid JSON: {why}".rstrip(": "))
    shape = [e for e in errors if tuple(e["loc"]) == ("body",) and e["type"] in _BODY_SHAPE]
    if shape and isinstance(shape[0].get("input"), bytes):
        # FastAPI parses JSON only when the Content-Type says so, which keeps browsers'
        # no-preflight form posts (CSRF) away from a --no-auth API on loopback.
        return ApiProblem(400, "the body must be JSON, sent as Content-Type: application/json")
    if shape:
        return ApiProblem(400, "the body must be a JSON object")
    items = [field_error(e["loc"], _reason(e)) for e in errors]
    too_large = [
        item
        for e, item in zip(errors, items, strict=True)
        if e["type"] == "too_large" or (e["type"] == "too_long" and tuple(e["loc"]) in _BATCHES)
    ]
    if too_large:
        first = too_large[0]
        return ApiProblem(
            413, f"{first.field}: {first.reason}", field=first.field, errors=too_large
        )
    return unprocessable(items)


def unprocessable(items: Sequence[FieldError]) -> ApiProblem:
    """A 422 listing every bad field; the first one is ``field`` (with its batch index
    folded in: ``jobs.3.schedule.cron``)."""
    first = items[0]
    field = first.field if first.index is None else f"jobs.{first.index}.{first.field}"
    detail = f"{field}: {first.reason}"
    if len(items) > 1:
        detail += f" (and {len(items) - 1} more)"
    return ApiProblem(422, detail, field=field, errors=items)


def _reason(error: Mapping[str, Any]) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    return str(error["msg"]).removeprefix("Value error, ")


def field_error(loc: Sequence[int | str], reason: str) -> FieldError:
    """The error at a request location (``("body", "jobs", 3, "name")``): the source is
    dropped, and a batch item's index is set apart from its field."""
    source, *rest = loc
    index = None
    if source == "body" and len(rest) > 1 and rest[0] == "jobs" and isinstance(rest[1], int):
        index, rest = rest[1], rest[2:]
    field, reason = refine(dotted(rest) or str(source), reason)
    return FieldError(field, reason, index)


# -- handlers ------------------------------------------------------------------------------
def install(app: FastAPI) -> None:
    """Register every exception handler on ``app``."""
    app.add_exception_handler(ApiProblem, _on_problem)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _on_http)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _on_validation)  # type: ignore[arg-type]
    app.add_exception_handler(InvalidInput, _on_invalid)  # type: ignore[arg-type]
    app.add_exception_handler(NotFound, _on_not_found)  # type: ignore[arg-type]
    app.add_exception_handler(StaleVersion, _on_stale)  # type: ignore[arg-type]
    app.add_exception_handler(Conflict, _on_conflict)  # type: ignore[arg-type]
    app.add_exception_handler(StoreUnavailable, _on_unavailable)  # type: ignore[arg-type]
    app.add_exception_handler(OverLimit, _on_over_limit)  # type: ignore[arg-type]
    app.add_exception_handler(ArithmeticError, _on_arithmetic)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _on_crash)


def render(problem: ApiProblem) -> JSONResponse:
    return problem_response(
        problem.status_code,
        str(problem.detail),
        field=problem.field,
        errors=problem.errors,
        headers=problem.headers,
    )


async def _on_problem(request: Request, exc: ApiProblem) -> JSONResponse:
    return render(exc)


async def _on_http(request: Request, exc: HTTPException) -> JSONResponse:
    # Starlette's own: unknown route (404), wrong method (405), unreadable body (400).
    detail = str(exc.detail)
    headers = exc.headers
    if exc.status_code == 404:
        detail = f"no such endpoint: {request.method} {request.url.path}"
    if exc.status_code == 405:
        # Starlette's Allow names the methods of the first route whose path matched, and
        # each method of a path is a route of its own here: GET /v1/jobs/{id} would
        # answer OPTIONS with "Allow: GET" and hide PATCH and DELETE.
        allowed = allowed_methods(request.app.router.routes, request.scope)
        headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        detail = f"{request.method} is not allowed here; this path allows {', '.join(allowed)}"
    return problem_response(exc.status_code, detail, headers=headers)


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route answers at the path of ``scope`` (HEAD with GET, as
    Starlette serves it), sorted."""
    found: set[str] = set()
    # Included routers nest; each context is a route with its full path.
    for context in iter_route_contexts(routes):
        methods = getattr(context.original_route, "methods", None)
        if methods and context.matches(scope)[0] is not Match.NONE:
            found.update(methods)
    return sorted(found)


async def _on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
    return render(from_validation(exc.errors()))


async def _on_invalid(request: Request, exc: InvalidInput) -> JSONResponse:
    return render(invalid(exc.field, exc.reason))


async def _on_not_found(request: Request, exc: NotFound) -> JSONResponse:
    return problem_response(404, str(exc))


async def _on_stale(request: Request, exc: StaleVersion) -> JSONResponse:
    return problem_response(
        412, exc.reason, field="version", errors=[FieldError("version", exc.reason)]
    )


async def _on_conflict(request: Request, exc: Conflict) -> JSONResponse:
    return problem_response(
        409,
        f"{exc.field}: {exc.reason}",
        field=exc.field,
        errors=[FieldError(exc.field, exc.reason)],
    )


async def _on_over_limit(request: Request, exc: OverLimit) -> JSONResponse:
    # The limit is the "field": a client (and the CLI) can tell which one it hit.
    return problem_response(
        429,
        f"{exc.limit}: {exc.reason}",
        field=exc.limit,
        errors=[FieldError(exc.limit, exc.reason)],
        headers={"Retry-After": str(exc.retry_after)},
    )


async def _on_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
    return problem_response(
        503, f"the store cannot be reached: {exc}", headers={"Retry-After": "1"}
    )


async def _on_arithmetic(request: Request, exc: ArithmeticError) -> JSONResponse:
    # Only extreme input makes dates and numbers overflow or vanish (an occurrence past
    # year 9999, an interval of a nanosecond); the validators name a field when they can.
    log.warning("arithmetic error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(422, f"a value is out of range: {exc}")


async def _on_crash(request: Request, exc: Exception) -> JSONResponse:
    # A bug, never an expected answer: log it whole, tell the client nothing internal.
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "an internal error occurred; it has been logged")
