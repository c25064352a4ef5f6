"""Webhooks: an HTTP request per attempt, signed, with the run's identity in headers.

2xx succeeds; 408, 429, 5xx, timeouts and connection errors are retried (Retry-After is
honoured); any other status is a permanent failure, and so is a target the egress policy
refuses (cronwheel.security.egress: it will be refused again). Requests say who sends
them (``User-Agent: cronwheel/<version>``) and what their body is (``text/plain`` for a
plain-string ``body``, ``application/json`` otherwise), unless the job's headers say.

Tenants are hostile (docs/security.md): each tenant's requests are signed with its own
key; a job's headers cannot replace cronwheel's; the response is streamed and at most
:data:`MAX_RESPONSE_READ` bytes of it are read (of a 2xx too, and dropped: its
connection is then kept for the next request); and what the run's history keeps of
a network failure is its class ("connection refused", "timed out", "TLS error"), never
the operating system's text, which could map the operator's ports.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from cronwheel._version import installed_version
from cronwheel.actions.context import RunContext, run_envelope
from cronwheel.actions.transport import checked_transport
from cronwheel.core.lifecycle import Outcome, OutcomeKind
from cronwheel.observability import metrics as _metrics
from cronwheel.security import signing
from cronwheel.security.egress import (
    REFUSED,
    EgressPolicy,
    EgressRefused,
    is_tls_error,
    origin_of,
)
from cronwheel.security.redact import mask_url, redact
from cronwheel.security.sealing import (
    Sealer,
    SecretsKeyMissing,
    SecretUnreadable,
    open_action,
    sent_secrets,
)

RETRYABLE_STATUS = frozenset({408, 429})
USER_AGENT = f"cronwheel/{installed_version()}"
"""How every webhook request introduces itself, unless its job sets its own."""
IDLE_TARGET_SECONDS = 60.0
"""A target not called for this long has its clients closed (checked as new ones come)."""
CONNECTIONS_PER_CLIENT = 10
"""Connections of one HTTP client (see WebhookAction): small enough that httpcore's scan
of them at every request is cheap (measured with bench/webhooks.py, 100 connections to
one target: 346 runs/s at 10 a client, 286 at 25, about 200 in one client of 100)."""
MAX_ERROR_BODY = 500
MAX_RESPONSE_READ = 8 * 1024
"""Bytes of a non-2xx answer read for its excerpt (MAX_ERROR_BODY characters); the rest
is never read: a 100 MB or endless answer costs the worker no memory."""
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
RESERVED_HEADERS = frozenset(
    {"host", "content-length", "transfer-encoding", "connection"}
    | {h.lower() for h in (*signing.SIGNED_HEADERS, signing.SIGNATURE_HEADER)}
    | {signing.SCHEDULED_FOR_HEADER.lower()}
)
"""Header names a job cannot set (in any case): cronwheel's own, and those that frame the
request. ``Cronwheel-*`` names are all reserved too (:func:`is_reserved_header`)."""


def is_reserved_header(name: str) -> bool:
    """Whether a job's header named ``name`` would shadow one cronwheel sends, or sit
    beside it for a receiver that reads ``_`` as ``-`` (``Cronwheel_Signature``)."""
    key = name.replace("_", "-").lower()
    return key in RESERVED_HEADERS or key.startswith("cronwheel-")


def request_body(action: Mapping[str, Any], ctx: RunContext) -> bytes:
    """The action's own ``body`` if it has one, else a JSON envelope with the payload."""
    body = action.get("body")
    if isinstance(body, str):
        return body.encode()
    if body is not None:
        return json.dumps(body).encode()
    return run_envelope(ctx)


def content_type(action: Mapping[str, Any]) -> str:
    """What the body is: a plain-string ``body`` is text, anything else is JSON."""
    if isinstance(action.get("body"), str):
        return "text/plain; charset=utf-8"
    return "application/json"


def request_headers(
    action: Mapping[str, Any], ctx: RunContext, body: bytes, key: bytes
) -> dict[str, str]:
    """The request's headers; ``key`` is the run's tenant's signing key. A job's reserved
    headers (refused at creation; a job stored before that may have one) are dropped."""
    own = {
        str(k): str(v)
        for k, v in dict(action.get("headers") or {}).items()
        if not is_reserved_header(str(k))
    }
    # The job's own Content-Type or User-Agent wins, however it spells the name: one
    # header each, never two that disagree.
    named = {name.lower() for name in own}
    headers = {}
    if "content-type" not in named:
        headers["Content-Type"] = content_type(action)
    if "user-agent" not in named:
        headers["User-Agent"] = USER_AGENT
    if "accept-encoding" not in named:
        # An answer is read raw (a compressed one could expand a thousandfold).
        headers["Accept-Encoding"] = "identity"
    headers |= own
    if ctx.trace:  # the attempt's span, which the target's own trace continues
        headers = {k: v for k, v in headers.items() if k.lower() not in TRACE_HEADERS}
        headers |= ctx.trace
    return headers | identity_headers(ctx, body, key)


def identity_headers(ctx: RunContext, body: bytes, key: bytes) -> dict[str, str]:
    """The run's identity and the signature over it and ``body`` (``key``: the tenant's
    signing key), as a webhook request or a published message carries them."""
    return {
        signing.TENANT_ID_HEADER: ctx.tenant_id,
        signing.IDEMPOTENCY_HEADER: ctx.idempotency_key,
        signing.RUN_ID_HEADER: str(ctx.run_id),
        signing.JOB_ID_HEADER: ctx.job_id,
        signing.ATTEMPT_HEADER: str(ctx.attempt),
        signing.FENCE_HEADER: str(ctx.fence),
        signing.SCHEDULED_FOR_HEADER: ctx.scheduled_for.isoformat(),
        signing.SIGNATURE_HEADER: signing.sign(
            key,
            tenant_id=ctx.tenant_id,
            job_id=ctx.job_id,
            run_id=ctx.run_id,
            attempt=ctx.attempt,
            fence=ctx.fence,
            idempotency_key=ctx.idempotency_key,
            body=body,
        ),
    }


def outcome_of(
    response: httpx.Response, excerpt: bytes = b"", secrets: Callable[[], Iterable[str]] = tuple
) -> Outcome:
    """The outcome of an answer; ``excerpt``: the first bytes of its body. ``secrets``
    gives the secret values the request was sent with, in every form
    (:func:`cronwheel.security.sealing.sent_secrets`): the error recorded of a failure
    (stored, shown to read keys, logged) has none of them, nor the URL's password. The
    whole excerpt is redacted before it is cut, so no secret is left half shown."""
    status = response.status_code
    if 200 <= status < 300:
        return Outcome(OutcomeKind.SUCCEEDED, http_status=status)
    sent = set(secrets())
    snippet = redact(_text_of(response, excerpt), sent)[:MAX_ERROR_BODY]
    url = mask_url(str(response.request.url))
    message = redact(f"{response.request.method} {url} answered {status}: {snippet}", sent)
    if status in RETRYABLE_STATUS or status >= 500:
        return Outcome(OutcomeKind.FAILED, f"HTTP{status}", message, retry_after(response), status)
    return Outcome(OutcomeKind.PERMANENT, f"HTTP{status}", message, http_status=status)


def _text_of(response: httpx.Response, excerpt: bytes) -> str:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        return f"({encoding}-encoded body not shown)"
    try:
        return excerpt.decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return excerpt.decode("utf-8", errors="replace")


async def _excerpt(response: httpx.Response) -> bytes:
    """At most MAX_RESPONSE_READ bytes of the body, raw; the rest is left unread."""
    read = bytearray()
    async for chunk in response.aiter_raw():
        read += chunk
        if len(read) >= MAX_RESPONSE_READ:
            break
    return bytes(read[:MAX_RESPONSE_READ])


MAX_RETRY_AFTER = 7 * 86_400
"""The longest wait a Retry-After can ask for, in seconds: as long as the longest
``max_delay`` a retry policy may have (which caps it further)."""
_RETRY_AFTER_DIGITS = 12
"""Seconds spelled with more digits than this are over MAX_RETRY_AFTER anyway: they are
not converted (a number of 5,000 digits is an error to int())."""


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds, from either form the header may take."""
    return parse_retry_after(response.headers.get("Retry-After"))


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """A Retry-After value in seconds, between 0 and :data:`MAX_RETRY_AFTER`: delay
    seconds (ASCII digits only: ``²`` and other scripts' digits are digits to
    ``str.isdigit``, not to HTTP) or an HTTP-date (``now``: the current Unix time). None
    when it is neither, or a date no calendar holds: the job's own backoff decides then.
    Never raises: what a target answers is not the worker's error."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        if len(value) > _RETRY_AFTER_DIGITS:
            return float(MAX_RETRY_AFTER)
        return float(min(int(value), MAX_RETRY_AFTER))
    if not value.isascii() or len(value) > 64:  # an HTTP-date is 29 ASCII characters
        return None
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    wait = when - (time.time() if now is None else now)
    if wait != wait:  # NaN
        return None
    return min(max(wait, 0.0), float(MAX_RETRY_AFTER))


class WebhookAction:
    """Sends webhook runs over one pooled client, to the targets ``egress`` allows
    (default: the public internet only), each tenant's signed with its own key derived
    from the operator's ``secret``. ``sealer`` opens the jobs' encrypted secret headers
    (cronwheel.security.sealing), just before each request. ``connections``: how many it opens at
    most (the worker's lanes keep its requests in flight within it)."""

    def __init__(
        self,
        secret: bytes,
        client: httpx.AsyncClient | None = None,
        *,
        metrics: _metrics.Metrics | None = None,
        egress: EgressPolicy | None = None,
        sealer: Sealer | None = None,
        connections: int = 100,
    ) -> None:
        self.secret = secret
        self.sealer = sealer
        self.egress = egress or EgressPolicy()
        self.metrics = metrics or _metrics.default()
        self.connections = connections
        self._client = client
        """A client given by the caller (tests) serves every target."""
        self._ssl = None if client is not None else httpx.create_ssl_context()
        self._targets: dict[str, _Target] = {}
        self._keys: dict[str, bytes] = {}
        self._closing: set[asyncio.Future[None]] = set()

    def key_of(self, tenant_id: str) -> bytes:
        """The tenant's signing key (derived once per tenant and process)."""
        key = self._keys.get(tenant_id)
        if key is None:
            key = self._keys[tenant_id] = signing.tenant_key(self.secret, tenant_id)
        return key

    async def execute(self, action: Mapping[str, Any], ctx: RunContext, timeout: float) -> Outcome:
        stored = action
        try:
            action = open_action(action, ctx.tenant_id, self.sealer)
        except SecretsKeyMissing as exc:
            # Permanent: every retry would find the same worker configuration.
            return Outcome(OutcomeKind.PERMANENT, "SecretsKeyMissing", str(exc))
        except SecretUnreadable as exc:
            return Outcome(OutcomeKind.PERMANENT, "SecretUnreadable", str(exc))
        body = request_body(action, ctx)
        method = str(action.get("method") or "POST").upper()
        url = mask_url(str(action["url"]))
        headers = request_headers(action, ctx, body, self.key_of(ctx.tenant_id))
        target, shard = self._client_for(str(action["url"]))
        if target.refused:
            # Refused by its spelling (a job stored before the API refused it): a literal
            # address in a form httpx would not normalise, a name internal by definition.
            self.metrics.webhook_response("connection")
            return Outcome(OutcomeKind.PERMANENT, "EgressRefused", f"{method} {url}: {REFUSED}")
        client = target.clients[shard]
        target.busy[shard] += 1
        try:
            request = client.build_request(
                method, str(action["url"]), content=body, headers=headers, timeout=timeout
            )
            response = await client.send(request, stream=True)
            try:
                # A 2xx answer's body is read too (up to the same bound) and dropped: a
                # response closed unread closes its connection, and every request would
                # then pay a new connection (and a TLS handshake) to a busy target.
                excerpt = await _excerpt(response)
            finally:
                await response.aclose()
        except EgressRefused:
            self.metrics.webhook_response("connection")
            return Outcome(OutcomeKind.PERMANENT, "EgressRefused", f"{method} {url}: {REFUSED}")
        except httpx.TimeoutException:
            self.metrics.webhook_response("timeout")
            return Outcome(OutcomeKind.FAILED, "Timeout", f"{method} {url}: timed out")
        except httpx.TransportError as exc:
            # Recorded in the run's history, which the tenant reads: the class of the
            # failure only. The OS's text ("[Errno 111] … port 6379") maps internal ports.
            self.metrics.webhook_response("connection")
            return Outcome(
                OutcomeKind.FAILED, exc.__class__.__name__, f"{method} {url}: {_failure(exc)}"
            )
        finally:
            target.busy[shard] -= 1
            target.used_at = time.monotonic()
        self.metrics.webhook_response(response.status_code)
        # The one place what a target answers is recorded: the error is redacted of every
        # secret this request carried, in every form (a target may echo its headers).
        return outcome_of(response, excerpt, lambda: sent_secrets(action, stored))

    def _client_for(self, url: str) -> tuple[_Target, int]:
        """The clients of the URL's target (its origin), and the least busy of them.

        Each target has clients of its own, of :data:`CONNECTIONS_PER_CLIENT`
        connections each: httpcore scans every connection of a client's pool (and asks
        the idle ones' sockets whether they are readable) at each request's start and
        end, so one pool of 200 spent a third of a busy worker's CPU on that scan; and a
        target's connections stay within its own limit (a receiver that serves so many
        connections at once is never sent more)."""
        origin = origin_of(url)
        target = self._targets.get(origin)
        if target is None:
            self._forget_idle_targets()
            if self._client is not None:
                target = _Target([self._client])
            else:
                shards = max(1, math.ceil(self.connections / CONNECTIONS_PER_CLIENT))
                each = math.ceil(self.connections / shards)
                # As many kept alive as opened: httpcore closes an idle connection
                # whenever it holds more connections than that (it counts them all, not
                # the idle ones), and a busy target would pay a new connection (and a
                # TLS handshake) per request. follow_redirects=False: a 3xx ends the
                # attempt, so no hop escapes the policy; a transport of our own means no
                # proxy from the environment: the policy checks the address connected to.
                limits = httpx.Limits(max_connections=each, max_keepalive_connections=each)
                target = _Target(
                    [
                        httpx.AsyncClient(
                            transport=checked_transport(self.egress, self._ssl, limits=limits),
                            follow_redirects=False,
                        )
                        for _ in range(shards)
                    ]
                )
            target.refused = self.egress.url_refusal(url) is not None
            self._targets[origin] = target
        return target, min(range(len(target.clients)), key=target.busy.__getitem__)

    def _forget_idle_targets(self) -> None:
        """Close the clients of targets unused for a while: a worker that has called
        thousands of targets keeps connections only to those it calls now."""
        now = time.monotonic()
        for origin, target in list(self._targets.items()):
            if not any(target.busy) and now - target.used_at > IDLE_TARGET_SECONDS:
                del self._targets[origin]
                if self._client is None:
                    for client in target.clients:
                        closing = asyncio.ensure_future(client.aclose())
                        self._closing.add(closing)
                        closing.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for target in self._targets.values():
            if self._client is None:
                for client in target.clients:
                    await client.aclose()
        if self._client is not None:
            await self._client.aclose()
        self._targets.clear()
        await asyncio.gather(*self._closing, return_exceptions=True)


@dataclasses.dataclass(slots=True)
class _Target:
    """The HTTP clients of one target (origin) and how many requests each has."""

    clients: list[httpx.AsyncClient]
    busy: list[int] = dataclasses.field(default_factory=list)
    used_at: float = dataclasses.field(default_factory=time.monotonic)
    refused: bool = False
    """The egress policy refuses the target by its URL alone (checked once per target)."""

    def __post_init__(self) -> None:
        self.busy = [0] * len(self.clients)


def _failure(exc: httpx.TransportError) -> str:
    """What a tenant is told of a network failure: its class, no detail."""
    if is_tls_error(exc):
        return "TLS error"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "the URL cannot be requested"
    return "connection lost"
