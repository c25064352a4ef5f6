"""Who is calling, and may they: bearer tokens, tenants and roles (docs/api.md).

A token is ``cw_<key id>_<secret>``; the store keeps only the SHA-256 of the whole token,
so a leaked database leaks no usable token. The ``--admin-token`` bootstrap and
``--no-auth`` (loopback only, refused elsewhere by the CLI) act as a system admin of the
``default`` tenant. A system admin acts for another tenant by naming it in the
``Cronwheel-Tenant`` header (see :func:`acting_for`).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from cronwheel.core.model import DEFAULT_TENANT, Role
from cronwheel.store.base import Store
from cronwheel.web.problems import ApiProblem

TOKEN_PREFIX = "cw_"
TENANT_HEADER = "Cronwheel-Tenant"
SESSION_COOKIE = "cronwheel_session"
"""The dashboard's sign-in: the API key itself, in an HttpOnly, SameSite=Strict cookie."""
CSRF_HEADER = "X-CSRF-Token"
"""What a cookie-authenticated change must carry: :func:`csrf_token` of the cookie's key."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_TENANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TOKEN_LENGTH = 256


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """How the API authenticates. ``disabled``: every request is a system admin."""

    admin_token: str | None = None
    disabled: bool = False


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: a tenant, a role, and a name for the audit log."""

    tenant_id: str
    role: Role
    actor: str
    home_tenant_id: str | None = None
    """The tenant of the caller's key when it acts for ``tenant_id`` (a system admin
    with the ``Cronwheel-Tenant`` header); None when they are the same."""

    @property
    def system_admin(self) -> bool:
        """An admin of the default tenant also manages tenants and every tenant's keys,
        whichever tenant it acts for."""
        home = self.home_tenant_id or self.tenant_id
        return self.role is Role.ADMIN and home == DEFAULT_TENANT


class Permission(Enum):
    """What an endpoint needs; see :data:`ROLES_FOR` for which roles have it."""

    READ = "read"
    WRITE = "write"
    WORK = "work"
    SEE_WORKERS = "see workers"
    ADMIN = "admin"
    SYSTEM_ADMIN = "system admin"


ROLES_FOR: dict[Permission, frozenset[Role]] = {
    Permission.READ: frozenset({Role.READ, Role.WRITE, Role.ADMIN}),
    Permission.WRITE: frozenset({Role.WRITE, Role.ADMIN}),
    Permission.WORK: frozenset({Role.WORKER, Role.ADMIN}),
    Permission.SEE_WORKERS: frozenset(Role),
    Permission.ADMIN: frozenset({Role.ADMIN}),
    Permission.SYSTEM_ADMIN: frozenset({Role.ADMIN}),
}


def hash_token(token: str) -> str:
    """What the store keeps of a token."""
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_token(token: str) -> str:
    """The anti-forgery token of a dashboard session: derived from the key the cookie
    holds, so only a page that was served to the key's holder knows it (decision 0023)."""
    return hmac.new(token.encode(), b"cronwheel dashboard csrf", hashlib.sha256).hexdigest()


def session_token(request: Request) -> str | None:
    """The API key of the dashboard session this request carries, if any."""
    token = request.cookies.get(SESSION_COOKIE)
    return token if token and len(token) <= MAX_TOKEN_LENGTH else None


def new_token(key_id: str) -> str:
    """A fresh token for key ``key_id``: 256 bits of secret."""
    return f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"


_bearer = HTTPBearer(
    auto_error=False,
    description="An API key: `cw_<key id>_<secret>` (or the server's --admin-token).",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _unauthorized(detail: str) -> ApiProblem:
    return ApiProblem(401, detail, headers={"WWW-Authenticate": "Bearer"})


_PRINCIPAL = "cronwheel.principal"
"""Where :class:`EarlyAuth` leaves the caller in the request's scope, so that the route's
own dependency does not look the key up a second time."""


async def authenticate(request: Request, credentials: Credentials) -> Principal:
    """The caller of this request, in the tenant it acts for; 401 if it has no valid
    token."""
    known = request.scope.get(_PRINCIPAL)
    if isinstance(known, Principal):
        return known
    principal = await acting_for(request, await _caller(request, credentials))
    request.scope[_PRINCIPAL] = principal
    return principal


async def acting_for(request: Request, principal: Principal) -> Principal:
    """The caller as the tenant its ``Cronwheel-Tenant`` header names: only a system
    admin may name another tenant than its own (403 for anyone else), and only one that
    exists (422 naming the header: it is a parameter of the request)."""
    wanted = request.headers.get(TENANT_HEADER)
    if wanted is None or wanted == principal.tenant_id:
        return principal
    if not principal.system_admin:
        raise ApiProblem(403, f"only a system admin may act for another tenant ({TENANT_HEADER})")
    store: Store = request.app.state.api.store
    if not _TENANT_ID.match(wanted) or await store.get_tenant(wanted) is None:
        raise ApiProblem(422, f"{TENANT_HEADER}: no tenant {wanted[:64]!r}", field=TENANT_HEADER)
    return Principal(wanted, principal.role, f"{principal.actor} for {wanted}", principal.tenant_id)


async def _caller(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """Whose token this request carries: its bearer token, else the dashboard's cookie."""
    config: AuthConfig = request.app.state.api.auth
    if request.method not in SAFE_METHODS and request.headers.get("Sec-Fetch-Site") == "cross-site":
        # A browser on another site's page: never a change, whatever it carries (an open
        # --no-auth API on loopback included).
        raise ApiProblem(403, "a change may not come from another site's page")
    if config.disabled:
        return Principal(DEFAULT_TENANT, Role.ADMIN, "no-auth")
    if credentials is not None:
        token = credentials.credentials
    elif (cookie := session_token(request)) is not None:
        # A browser sends the cookie with every request to this site, so a change made
        # with it must prove it comes from a page we served: the CSRF header.
        if request.method not in SAFE_METHODS and not hmac.compare_digest(
            request.headers.get(CSRF_HEADER, "").encode(), csrf_token(cookie).encode()
        ):
            raise ApiProblem(403, f"a change made with the dashboard's cookie needs {CSRF_HEADER}")
        token = cookie
    else:
        raise _unauthorized("an Authorization: Bearer <token> header is required")
    principal = await principal_of_token(request, token)
    if principal is None:
        raise _unauthorized("unknown or revoked token")
    return principal


async def principal_of_token(request: Request, token: str) -> Principal | None:
    """The key ``token`` is (or the server's admin token), or None: unknown or revoked."""
    state = request.app.state.api
    config: AuthConfig = state.auth
    if config.disabled:
        return Principal(DEFAULT_TENANT, Role.ADMIN, "no-auth")
    if config.admin_token and hmac.compare_digest(token.encode(), config.admin_token.encode()):
        return Principal(DEFAULT_TENANT, Role.ADMIN, "admin-token")
    if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None
    store: Store = state.store
    key = await store.find_api_key(hash_token(token))
    if key is None or key.revoked_at is not None:
        return None
    return Principal(key.tenant_id, key.role, f"key:{key.id}")


def allowed(principal: Principal, permission: Permission) -> bool:
    """Whether ``principal``'s role has ``permission`` (what a page asks to show a button)."""
    if permission is Permission.SYSTEM_ADMIN:
        return principal.system_admin
    return principal.role in ROLES_FOR[permission]


def check_permission(principal: Principal, permission: Permission) -> None:
    """403 unless ``principal``'s role has ``permission``."""
    if not allowed(principal, permission):
        raise ApiProblem(
            403, f"a {principal.role.value} key may not do this (needs {permission.value})"
        )


_PERMISSION_OF: dict[Callable[..., Any], Permission] = {}
"""The permission each :func:`require` dependency checks, for :class:`EarlyAuth`."""


def require(permission: Permission) -> object:
    """A dependency: the caller, if its role has ``permission``; 403 otherwise."""

    async def check(principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        check_permission(principal, permission)
        return principal

    _PERMISSION_OF[check] = permission
    return Depends(check)


Reader = Annotated[Principal, require(Permission.READ)]
Writer = Annotated[Principal, require(Permission.WRITE)]
WorkerKey = Annotated[Principal, require(Permission.WORK)]
WorkerWatcher = Annotated[Principal, require(Permission.SEE_WORKERS)]
Admin = Annotated[Principal, require(Permission.ADMIN)]
SystemAdmin = Annotated[Principal, require(Permission.SYSTEM_ADMIN)]


# -- before the body -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Guarded:
    """What a route's dependencies ask of the caller: to be authenticated, and these
    permissions."""

    permissions: tuple[Permission, ...]


def _guard_of(route: APIRoute) -> _Guarded | None:
    """The route's authentication, if any of its dependencies (at any depth) authenticates."""
    found, permissions = False, []
    stack: list[Dependant] = [route.dependant]
    while stack:
        dependant = stack.pop()
        if dependant.call is authenticate:
            found = True
        elif dependant.call in _PERMISSION_OF:
            permissions.append(_PERMISSION_OF[dependant.call])
        stack.extend(dependant.dependencies)
    return _Guarded(tuple(permissions)) if found else None


def authenticates(route: APIRoute) -> bool:
    """Whether ``route`` needs a caller (one of its dependencies authenticates)."""
    return _guard_of(route) is not None


def known_caller(scope: Scope) -> bool:
    """Whether this request's caller was found already (and allowed)."""
    return isinstance(scope.get(_PRINCIPAL), Principal)


class EarlyAuth:
    """The refusals a route's own dependencies would make (401, 403, and 422 for an
    unknown ``Cronwheel-Tenant``), made from the headers alone, before anyone reads the
    request's body: a caller without a valid key cannot make the API read, hold and
    parse megabytes for nothing.

    The route's dependencies stay the authority: this only answers early what they
    would answer anyway, and leaves the caller it found in the scope for them. Anything
    it cannot decide here (the store is down) is left to the route."""

    def __init__(self, routes: list[BaseRoute]) -> None:
        # Included routers nest; their routes, each with its full path, in the router's
        # order.
        contexts = list(iter_route_contexts(routes))
        self.routes = [
            (context, _guard_of(route) if isinstance(route, APIRoute) else None)
            for context in contexts
            for route in [context.original_route]
        ]

    def guard_for(self, scope: Scope) -> _Guarded | None:
        """The authentication of the route the router will give this request to, found
        as the router finds it: the first route that matches path and method."""
        for context, guarded in self.routes:
            match, _ = context.matches(scope)
            if match is Match.FULL:
                return guarded
        return None

    async def refusal(self, scope: Scope) -> ApiProblem | None:
        """Why this request would be refused by its route's authentication, or None."""
        guarded = self.guard_for(scope)
        if guarded is None:
            return None
        request = Request(scope)
        try:
            principal = await authenticate(request, await _bearer(request))
            for permission in guarded.permissions:
                check_permission(principal, permission)
        except ApiProblem as problem:
            return problem
        except Exception:
            return None  # the route's dependency meets it again and answers as it does
        return None
