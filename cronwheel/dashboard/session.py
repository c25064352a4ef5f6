"""Who is looking: signing in with an API key, the cookie that keeps it, and what the
viewer may do (which decides the buttons a page shows).

The cookie holds the API key itself, HttpOnly (no script can read it) and
SameSite=Strict (no other site's page sends it). Every change a page makes goes to the
JSON API with the cookie and :data:`~cronwheel.web.auth.CSRF_HEADER`, derived from the
key, which only our pages carry (decision 0023). With ``--no-auth`` (``cronwheel dev``
on loopback) there is nothing to sign in to, as with the API."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from cronwheel.core.model import DEFAULT_TENANT, Role
from cronwheel.web.auth import (
    SESSION_COOKIE,
    AuthConfig,
    Permission,
    Principal,
    allowed,
    csrf_token,
    principal_of_token,
    session_token,
)
from cronwheel.web.state import api_state

if TYPE_CHECKING:
    from cronwheel.web.state import ApiState

router = APIRouter(include_in_schema=False)

MAX_FORM = 4096


class SignInRequired(Exception):
    """The visitor has no valid session: the page sends them to sign in."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """The signed-in person, as pages need them."""

    principal: Principal
    csrf: str
    """What the page's script sends with every change (empty with --no-auth)."""
    open: bool
    """The API runs without auth (``cronwheel dev``): no sign-in, no sign-out."""

    @property
    def tenant_id(self) -> str:
        return self.principal.tenant_id

    def can(self, permission: str) -> bool:
        """Whether a button for ``permission`` (``write``, ``admin``, ``system admin``)
        would work: a page shows only those that would."""
        return allowed(self.principal, Permission(permission))


async def current_viewer(request: Request) -> Viewer:
    """The viewer of this page request; :class:`SignInRequired` if there is none."""
    state: ApiState = api_state(request)
    config: AuthConfig = state.auth
    token = session_token(request)
    if config.disabled:
        viewer = Viewer(Principal(DEFAULT_TENANT, Role.ADMIN, "no-auth"), "", open=True)
    elif token is None or (principal := await principal_of_token(request, token)) is None:
        raise SignInRequired
    else:
        viewer = Viewer(principal, csrf_token(token), open=False)
    request.state.viewer = viewer
    return viewer


CurrentViewer = Annotated[Viewer, Depends(current_viewer)]


@dataclass(frozen=True, slots=True)
class NavItem:
    href: str
    label: str


def nav_for(viewer: Viewer | None) -> list[NavItem]:
    """The navigation this viewer gets: tenants and keys only for an admin."""
    if viewer is None:
        return []
    items = [
        NavItem("/ui/", "Overview"),
        NavItem("/ui/jobs", "Jobs"),
        NavItem("/ui/pipelines", "Pipelines"),
        NavItem("/ui/dead", "Dead letter"),
        NavItem("/ui/workers", "Workers"),
    ]
    if viewer.can("admin"):
        items.append(NavItem("/ui/admin", "Tenants & keys"))
    return items


def _safe_next(target: str | None) -> str:
    """Where to go after signing in: only a dashboard page of this site."""
    if not target or not target.startswith("/ui") or target.startswith("//") or "\\" in target:
        return "/ui/"
    return target


async def _form(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM:
        return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    return {k: v[0] for k, v in fields.items() if v}


def _signin_page(request: Request, *, error: str | None, target: str, status: int) -> Response:
    from cronwheel.dashboard.render import page  # the layout needs this module first

    return page(
        request,
        None,
        "signin.html",
        title="Sign in",
        error=error,
        target=target,
        status=status,
    )


@router.get("/ui/signin")
async def signin_form(request: Request, next: str | None = None) -> Response:
    if api_state(request).auth.disabled:
        return RedirectResponse("/ui/", status_code=303)
    return _signin_page(request, error=None, target=_safe_next(next), status=200)


def _from_another_site(request: Request) -> bool:
    """Whether a browser sent this request from another site's page (login CSRF: a page
    elsewhere posting the attacker's key signs the visitor in as the attacker, and what
    they then enter lands in the attacker's tenant). A browser says where a request
    comes from in ``Sec-Fetch-Site``, which no page can set: only ``same-origin`` (our
    own sign-in form) and ``none`` (typed, a bookmark) pass. A browser that does not send
    it is judged by ``Origin``, which must be this site's own. A client that sends
    neither is not a browser, and has no visitor to sign in."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site.strip().lower() not in ("same-origin", "none")
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    parts = urlsplit(origin.strip())
    host = request.headers.get("Host", "")
    return parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower()


@router.post("/ui/signin")
async def signin(request: Request) -> Response:
    if _from_another_site(request):
        return HTMLResponse(
            "sign-in must come from this site's sign-in page (not another site's)",
            status_code=403,
        )
    form = await _form(request)
    target = _safe_next(form.get("next"))
    token = form.get("token", "").strip()
    principal = await principal_of_token(request, token) if token else None
    if principal is None:
        error = "That API key is unknown or revoked." if token else "Enter an API key."
        return _signin_page(request, error=error, target=target, status=401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.post("/ui/signout")
async def signout(request: Request) -> Response:
    form = await _form(request)
    token = session_token(request)
    if token is not None and not hmac.compare_digest(
        form.get("csrf", "").encode(), csrf_token(token).encode()
    ):
        return HTMLResponse("sign-out needs the page's token", status_code=403)
    response = RedirectResponse("/ui/signin", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response
