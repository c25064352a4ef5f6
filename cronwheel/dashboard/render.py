"""Turning a page's facts into HTML: the templates, the filters they share, the headers
every page carries, and the route class that turns errors into pages."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from cronwheel.dashboard.session import SignInRequired, Viewer, nav_for
from cronwheel.errors import Conflict, InvalidInput, NotFound, StaleVersion
from cronwheel.web.problems import ApiProblem

SECURITY_HEADERS: Mapping[str, str] = {
    # Only our own files run or style the page: an injected tag could do nothing.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

templates = Environment(
    loader=PackageLoader("cronwheel.dashboard", "templates"),
    autoescape=select_autoescape(default=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _instant(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def when(value: Any, empty: str = "—") -> Markup:
    """A ``<time>``: UTC in the page (and on hover); the script shows it in the
    browser's zone."""
    instant = _instant(value)
    if instant is None:
        return Markup("<span>{}</span>").format(empty)
    utc = instant.astimezone(UTC)
    iso = utc.isoformat().replace("+00:00", "Z")
    shown = f"{utc:%Y-%m-%d %H:%M:%S} UTC"
    return Markup('<time datetime="{}" title="{}">{}</time>').format(iso, shown, shown)


def seconds(value: Any) -> str:
    """A duration a person reads: ``850 ms``, ``12.5 s``, ``3 min 20 s``, ``2 h 5 min``."""
    if value is None:
        return "—"
    s = float(value)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60)} s"
    if s < 86400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60)} min"
    return f"{int(s // 86400)} d {int(s % 86400 // 3600)} h"


def to_json(value: Any) -> str:
    """JSON for a ``data-`` attribute or a ``<pre>`` (escaped by the template)."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)


templates.filters.update(when=when, seconds=seconds, json=to_json, urlquote=quote)


def page(
    request: Request,
    viewer: Viewer | None,
    template: str,
    *,
    title: str,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """A whole page: ``template`` inside the layout, with the viewer's navigation."""
    html = templates.get_template(template).render(
        request=request,
        viewer=viewer,
        nav=nav_for(viewer),
        path=request.url.path,
        title=title,
        **context,
    )
    return HTMLResponse(html, status_code=status, headers=dict(SECURITY_HEADERS))


def fragment(template: str, **context: Any) -> HTMLResponse:
    """A part of a page the script swaps in (a live table), without the layout."""
    html = templates.get_template(template).render(**context)
    return HTMLResponse(html, headers=dict(SECURITY_HEADERS))


def error_page(request: Request, status: int, detail: str) -> HTMLResponse:
    viewer: Viewer | None = getattr(request.state, "viewer", None)
    titles = {404: "Not found", 403: "Not allowed", 409: "Conflict", 422: "Invalid input"}
    return page(
        request,
        viewer,
        "error.html",
        title=titles.get(status, "Error"),
        status=status,
        status_code=status,
        detail=detail,
    )


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class PageRoute(APIRoute):
    """A dashboard route: a visitor who is not signed in goes to the sign-in page, and an
    error is a page that says what went wrong (a job of another tenant is simply not
    found), never a JSON problem or a traceback."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequired:
                target = request.url.path
                if request.url.query:
                    target += "?" + request.url.query
                return RedirectResponse(f"/ui/signin?next={quote(target)}", status_code=303)
            except NotFound as exc:
                return error_page(request, 404, str(exc))
            except (StaleVersion, Conflict) as exc:
                return error_page(request, 409, str(exc))
            except InvalidInput as exc:
                return error_page(request, 422, str(exc))
            except ApiProblem as exc:
                return error_page(request, exc.status_code, str(exc.detail))

        return route
