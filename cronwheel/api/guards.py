"""What stands between the network and the routes: body size, and JSON the store can keep.

Bad input must never reach the store nor cause a 5xx, and some JSON that Python accepts
would do both: ``NaN`` and ``1e400`` (not storable as JSON), a NUL character or a lone
surrogate in a string (PostgreSQL text refuses them; UTF-8 cannot encode the latter), and
nesting deep enough to exhaust the recursion limit of whatever serialises it next.
"""

from __future__ import annotations

import contextlib
import email.message
import gc
import json
import math
import re
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any

import anyio.to_thread
from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.web import auth
from cronwheel.web.problems import ApiProblem, field_error, problem_response, render

MAX_DEPTH = 64
"""Containers nested deeper than this are refused (422)."""
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


OFF_LOOP_BYTES = 64 * 1024
"""A JSON body larger than this is parsed and validated on a worker thread: a maximal
batch takes about a second of CPU, which on the event loop would stall every other
request (``/healthz`` included) for as long (decision 0036)."""


class RequestGuard:
    """ASGI middleware, before anything reads a request's body: a NUL character in the
    path or query string is refused (400), then a caller whose route would refuse it
    (401, 403: see :class:`~cronwheel.web.auth.EarlyAuth`), then a body over its route's
    limit (413, as soon as the limit is passed).

    ``limits`` maps paths to their own limit; a path may hold ``{parameters}`` as routes
    do (``/v1/jobs/{job_id}/runs``), each matching one path segment."""

    def __init__(self, app: ASGIApp, *, default_limit: int, limits: Mapping[str, int]) -> None:
        self.app = app
        self.default_limit = default_limit
        self.limits = {path: n for path, n in limits.items() if "{" not in path}
        self.patterns = [(_path_pattern(path), n) for path, n in limits.items() if "{" in path]
        self.early_auth: auth.EarlyAuth | None = None

    def _early_auth(self, scope: Scope) -> auth.EarlyAuth:
        if self.early_auth is None:  # the app's routes are all there by then
            self.early_auth = auth.EarlyAuth(scope["app"].routes)
        return self.early_auth

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
        if scope["type"] == "lifespan":
            # Finding every route's authentication takes a few hundred milliseconds: at
            # start-up rather than in some caller's request.
            self._early_auth(scope)
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            await problem_response(400, "NUL characters are not allowed in a URL")(
                scope, receive, send
            )
            return
        headers = Headers(scope=scope)
        if _has_body(headers):
            refusal = await self._early_auth(scope).refusal(scope)
            if refusal is not None:
                await render(refusal)(scope, receive, send)
                return
        limit = self.limit_for(scope["path"])
        body = await _read_body(scope, receive, limit)
        if body is None:
            detail = (
                f"the request body is over {_size(limit)}, the limit of {scope['method']} "
                f"{scope['path']}; send less at once (docs/api.md, request bodies)"
            )
            await problem_response(413, detail)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


def _has_body(headers: Headers) -> bool:
    declared = headers.get("content-length")
    return "transfer-encoding" in headers or (declared is not None and declared != "0")


def _size(limit: int) -> str:
    """A limit as people write it: ``8 MiB``, ``256 KiB``, ``100 bytes``."""
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if limit % size == 0:
            return f"{limit // size} {unit}"
    return f"{limit} bytes"


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


_DECODER = json.JSONDecoder(parse_float=_finite, parse_constant=_no_constant)
_WHITESPACE: re.Pattern[str] = json.decoder.WHITESPACE  # type: ignore[attr-defined]
_JSONObject: Callable[..., tuple[Any, int]] = json.decoder.JSONObject  # type: ignore[attr-defined]
_JSONArray: Callable[..., tuple[Any, int]] = json.decoder.JSONArray  # type: ignore[attr-defined]
_PIECEWISE_DEPTH = 2
"""How deep :func:`_loads` parses containers value by value: the body's object and its
arrays (a batch's ``jobs``, ``payloads``); each value below is one call of the C parser."""


def _scanner(depth: int) -> Callable[[str, int], tuple[Any, int]]:
    def scan(text: str, idx: int) -> tuple[Any, int]:
        if depth < _PIECEWISE_DEPTH:
            opening = text[idx : idx + 1]
            if opening == "{":
                return _JSONObject((text, idx + 1), True, _scanner(depth + 1), None, None, {})
            if opening == "[":
                return _JSONArray((text, idx + 1), _scanner(depth + 1))
        found: tuple[Any, int] = _DECODER.scan_once(text, idx)  # type: ignore[attr-defined]
        return found

    return scan


def _skip_whitespace(text: str, idx: int) -> int:
    found = _WHITESPACE.match(text, idx)
    assert found is not None  # the pattern matches the empty string
    return found.end()


def _loads(text: str) -> Any:
    """``json.loads(text)`` with the strict hooks, the same value and the same errors, but
    the outer containers are parsed item by item (the standard library's own pure-Python
    object and array steps around its C parser). One C call over a whole 8 MiB batch
    holds the GIL for about 100 ms, stalling the event loop even from a worker thread;
    one item at a time lets it run between items."""
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    try:
        value, end = _scanner(0)(text, _skip_whitespace(text, 0))
    except StopIteration as err:
        raise json.JSONDecodeError("Expecting value", text, err.value) from None
    end = _skip_whitespace(text, end)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def strict_loads(body: bytes, charset: str | None = None) -> Any:
    """Parse a JSON body as RFC 8259 has it (UTF-8 only: 415 otherwise), then check that
    every string and nesting level can be stored: an ApiProblem (422) naming the field
    otherwise."""
    text = utf8_text(body, charset)
    value = _loads(text)
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


_pausing = 0
_paused_by_us = False
_pausing_lock = threading.Lock()


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic garbage collection while a large body becomes objects. Parsing a
    maximal batch allocates hundreds of thousands of containers, which sets off full
    collections that walk all of them while holding the GIL: measured, pauses of 200 ms
    and more on the event loop, from a worker thread. JSON makes no reference cycles, so
    nothing is left for the collector to find; it runs again as usual afterwards."""
    global _pausing, _paused_by_us
    with _pausing_lock:
        _pausing += 1
        if _pausing == 1 and gc.isenabled():
            gc.disable()
            _paused_by_us = True
    try:
        yield
    finally:
        with _pausing_lock:
            _pausing -= 1
            if _pausing == 0 and _paused_by_us:
                gc.enable()
                _paused_by_us = False


def _free_piecewise(value: Any) -> None:
    """Drop a parsed body's outer lists item by item: freeing a maximal batch at once is
    one C call that holds the GIL for about 100 ms, wherever its last reference goes."""
    lists = [value] if isinstance(value, list) else []
    if isinstance(value, dict):
        lists = [item for item in value.values() if isinstance(item, list)]
    for items in lists:
        while items:
            items.pop()


def _is_json(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this type as JSON (the test it makes itself)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class StrictJsonRequest(Request):
    """A request whose JSON is :func:`strict_loads` (FastAPI parses bodies with ``json()``).

    A large body is parsed and validated on a worker thread first
    (:meth:`validate_off_loop`); FastAPI's ``json()`` then gets the validated model, which
    its own validation passes through untouched, and :meth:`parsed` the JSON value."""

    _model: Any
    _failure: Exception

    async def parsed(self) -> Any:
        """The body as a JSON value."""
        if not hasattr(self, "_json"):
            if hasattr(self, "_failure"):
                raise self._failure
            charset = _charset(self.headers.get("content-type", ""))
            self._json = strict_loads(await self.body(), charset)
        return self._json

    async def json(self) -> Any:
        if hasattr(self, "_model"):
            return self._model
        return await self.parsed()

    async def validate_off_loop(self, field: Any, *, authenticated: bool) -> None:
        """Parse and validate a large body on a worker thread. A body that cannot be
        parsed fails where FastAPI parses it (``json()``), as a small one does; one that
        does not validate is refused here if the caller is known (the route would check
        the caller first), else left to FastAPI to validate again."""
        body = await self.body()
        if len(body) <= OFF_LOOP_BYTES:
            return
        charset = _charset(self.headers.get("content-type", ""))

        def work() -> tuple[Any, Any, list[Any]]:
            with _collector_paused():
                value = strict_loads(body, charset)
                validated, errors = field.validate(value, {}, loc=("body",))
                if errors and authenticated:  # refused: nothing will read the value
                    _free_piecewise(value)
                    return None, None, errors
                return value, validated, errors

        try:
            self._json, validated, errors = await anyio.to_thread.run_sync(work)
        except Exception as exc:
            self._failure = exc
            return
        if not errors:
            self._model = validated
        elif authenticated:
            raise RequestValidationError(errors)


class GuardedRoute(APIRoute):
    """A route that reads its JSON body strictly, off the event loop when it is large. A
    refusal is an ApiProblem, which FastAPI lets through to the exception handlers as it
    is."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        field = self._body_model()
        needs_caller = auth.authenticates(self)

        async def guarded(request: Request) -> Response:
            strict = StrictJsonRequest(request.scope, request.receive)
            if field is not None and _is_json(strict.headers.get("content-type")):
                known = not needs_caller or auth.known_caller(strict.scope)
                await strict.validate_off_loop(field, authenticated=known)
            return await handler(strict)

        return guarded

    def _body_model(self) -> Any:
        """The one body field FastAPI validates the whole JSON body against, if that is
        how this route takes its body (not embedded, not a form)."""
        params = self.dependant.body_params
        if len(params) != 1 or getattr(self, "_embed_body_fields", True):
            return None
        if self.body_field is not params[0]:
            return None
        return params[0]
