"""What stands between the network and the routes: body size, and JSON the store can keep.

Bad input must never reach the store nor cause a 5xx, and some JSON that Python accepts
would do both: ``NaN`` and ``1e400`` (not storable as JSON), a NUL character or a lone
surrogate in a string (PostgreSQL text refuses them; UTF-8 cannot encode the latter), and
nesting deep enough to exhaust the recursion limit of whatever serialises it next.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.api.problems import ApiProblem, field_error, problem_response

MAX_DEPTH = 64
"""Containers nested deeper than this are refused (422)."""
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


class RequestGuard:
    """ASGI middleware: a body over its route's limit is refused with 413 before anything
    reads it, and a NUL character in the path or query string with 400.

    ``limits`` maps paths to their own limit; a path may hold ``{parameters}`` as routes
    do (``/v1/jobs/{job_id}/runs``), each matching one path segment."""

    def __init__(self, app: ASGIApp, *, default_limit: int, limits: Mapping[str, int]) -> None:
        self.app = app
        self.default_limit = default_limit
        self.limits = {path: n for path, n in limits.items() if "{" not in path}
        self.patterns = [(_path_pattern(path), n) for path, n in limits.items() if "{" in path]

    def limit_for(self, path: str) -> int:
        """The body limit of a request to ``path``."""
        found = self.limits.get(path)
        if found is not None:
            return found
        for pattern, limit in self.patterns:
            if pattern.fullmatch(path):
                return limit
        return self.default_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            await problem_response(400, "NUL characters are not allowed in a URL")(
                scope, receive, send
            )
            return
        limit = self.limit_for(scope["path"])
        body = await _read_body(scope, receive, limit)
        if body is None:
            await problem_response(413, f"the request body is over {limit} bytes")(
                scope, receive, send
            )
            return
        await self.app(scope, _replay(body, receive), send)


_PARAMETER = re.compile(r"\{[^{}/]+\}")


def _path_pattern(template: str) -> re.Pattern[str]:
    """``/v1/jobs/{job_id}/runs`` as a pattern: each parameter is one non-empty segment,
    the rest is literal."""
    parts = _PARAMETER.split(template)
    return re.compile("[^/]+".join(re.escape(part) for part in parts))


async def _read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None if it is over ``limit`` (checked on the declared length
    first, so an honest large upload is refused without being read)."""
    declared = Headers(scope=scope).get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away; the app sees an empty body and answers no one
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


# -- strict JSON -----------------------------------------------------------------------------
def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"the number {text[:40]} is out of range", text, 0)
    return value


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


def utf8_text(body: bytes, declared: str | None = None) -> str:
    """The body as text, if it is UTF-8 (RFC 8259: JSON exchanged between systems is
    UTF-8); a 415 naming the encoding otherwise. ``json.loads`` would guess UTF-16 and
    UTF-32 from the first bytes and take them: accepted one way here and stored another
    way there is how two parsers come to disagree. A byte order mark is let through."""
    if declared is not None and declared.strip().strip('"').lower() not in ("utf-8", "utf8"):
        raise _not_utf8(f"is declared as charset={declared}")
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        raise _not_utf8(f"is encoded as {encoding.upper()}")
    try:
        return body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise _not_utf8(
            f"is not valid UTF-8 (byte 0x{body[exc.start]:02x} at offset {exc.start})"
        ) from None


def _not_utf8(why: str) -> ApiProblem:
    return ApiProblem(415, f"the request body {why}: send JSON encoded in UTF-8", field="body")


def strict_loads(body: bytes, charset: str | None = None) -> Any:
    """Parse a JSON body as RFC 8259 has it (UTF-8 only: 415 otherwise), then check that
    every string and nesting level can be stored: an ApiProblem (422) naming the field
    otherwise."""
    text = utf8_text(body, charset)
    value = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    check_storable(value)
    return value


def check_storable(value: Any) -> None:
    """Walk ``value`` without recursion (its depth is what is being checked)."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if len(path) > MAX_DEPTH:
            raise _unstorable(path, f"is nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            if _BAD_CHARS.search(item):
                raise _unstorable(path, "contains a NUL character or an unpaired surrogate")
        elif isinstance(item, dict):
            for key, child in item.items():
                if _BAD_CHARS.search(key):
                    raise _unstorable(path, "has a key with a NUL character or a lone surrogate")
                stack.append((child, (*path, key)))
        elif isinstance(item, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(item))


def _unstorable(path: tuple[int | str, ...], reason: str) -> ApiProblem:
    error = field_error(("body", *path), reason)
    where = error.field if error.index is None else f"jobs.{error.index}.{error.field}"
    return ApiProblem(422, f"{where}: {reason}", field=where, errors=[error])


def _charset(content_type: str) -> str | None:
    """The ``charset`` parameter of a Content-Type header, if it has one."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value
    return None


class StrictJsonRequest(Request):
    """A request whose ``json()`` is :func:`strict_loads` (FastAPI parses bodies with it)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            charset = _charset(self.headers.get("content-type", ""))
            self._json = strict_loads(await self.body(), charset)
        return self._json


class GuardedRoute(APIRoute):
    """A route that reads its JSON body strictly. A refusal is an ApiProblem, which
    FastAPI lets through to the exception handlers as it is."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            return await handler(StrictJsonRequest(request.scope, request.receive))

        return guarded
