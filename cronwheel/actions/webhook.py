"""Webhooks: an HTTP request per attempt, signed, with the run's identity in headers.

2xx succeeds; 408, 429, 5xx, timeouts and connection errors are retried (Retry-After is
honoured); any other status is a permanent failure. Requests say who sends them
(``User-Agent: cronwheel/<version>``) and what their body is (``text/plain`` for a
plain-string ``body``, ``application/json`` otherwise), unless the job's headers say.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from cronwheel import metrics as _metrics
from cronwheel._version import installed_version
from cronwheel.actions import signing
from cronwheel.actions.context import RunContext
from cronwheel.lifecycle import Outcome, OutcomeKind
from cronwheel.redact import is_secret_header, mask_url, redact

RETRYABLE_STATUS = frozenset({408, 429})
USER_AGENT = f"cronwheel/{installed_version()}"
"""How every webhook request introduces itself, unless its job sets its own."""
MAX_ERROR_BODY = 500
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})


def request_body(action: Mapping[str, Any], ctx: RunContext) -> bytes:
    """The action's own ``body`` if it has one, else a JSON envelope with the payload."""
    body = action.get("body")
    if isinstance(body, str):
        return body.encode()
    if body is not None:
        return json.dumps(body).encode()
    envelope = {
        "run_id": ctx.run_id,
        "job_id": ctx.job_id,
        "job_name": ctx.job_name,
        "scheduled_for": ctx.scheduled_for.isoformat(),
        "attempt": ctx.attempt,
        "payload": ctx.payload,
    }
    return json.dumps(envelope).encode()


def content_type(action: Mapping[str, Any]) -> str:
    """What the body is: a plain-string ``body`` is text, anything else is JSON."""
    if isinstance(action.get("body"), str):
        return "text/plain; charset=utf-8"
    return "application/json"


def request_headers(
    action: Mapping[str, Any], ctx: RunContext, body: bytes, secret: bytes
) -> dict[str, str]:
    own = {str(k): str(v) for k, v in dict(action.get("headers") or {}).items()}
    # The job's own Content-Type or User-Agent wins, however it spells the name: one
    # header each, never two that disagree.
    named = {name.lower() for name in own}
    headers = {}
    if "content-type" not in named:
        headers["Content-Type"] = content_type(action)
    if "user-agent" not in named:
        headers["User-Agent"] = USER_AGENT
    headers |= own
    if ctx.trace:  # the attempt's span, which the target's own trace continues
        headers = {k: v for k, v in headers.items() if k.lower() not in TRACE_HEADERS}
        headers |= ctx.trace
    headers |= {
        signing.IDEMPOTENCY_HEADER: ctx.idempotency_key,
        signing.RUN_ID_HEADER: str(ctx.run_id),
        signing.JOB_ID_HEADER: ctx.job_id,
        signing.ATTEMPT_HEADER: str(ctx.attempt),
        signing.FENCE_HEADER: str(ctx.fence),
        signing.SCHEDULED_FOR_HEADER: ctx.scheduled_for.isoformat(),
        signing.SIGNATURE_HEADER: signing.sign(
            secret,
            run_id=ctx.run_id,
            attempt=ctx.attempt,
            fence=ctx.fence,
            idempotency_key=ctx.idempotency_key,
            body=body,
        ),
    }
    return headers


def outcome_of(response: httpx.Response) -> Outcome:
    status = response.status_code
    if 200 <= status < 300:
        return Outcome(OutcomeKind.SUCCEEDED, http_status=status)
    snippet = response.text[:MAX_ERROR_BODY]
    message = f"{response.request.method} {response.request.url} answered {status}: {snippet}"
    if status in RETRYABLE_STATUS or status >= 500:
        return Outcome(OutcomeKind.FAILED, f"HTTP{status}", message, retry_after(response), status)
    return Outcome(OutcomeKind.PERMANENT, f"HTTP{status}", message, http_status=status)


def _without_secrets(outcome: Outcome, action: Mapping[str, Any]) -> Outcome:
    """The outcome with no credential in its error: the URL's password, and the secret
    headers' values a target may echo back in the body of its error answer."""
    if outcome.error_message is None:
        return outcome
    headers = action.get("headers") or {}
    sent = [str(v) for k, v in headers.items() if is_secret_header(str(k))]
    sent += [str(v).split(" ", 1)[1] for v in sent if " " in str(v)]  # "Bearer <token>"
    return dataclasses.replace(outcome, error_message=redact(outcome.error_message, sent))


def retry_after(response: httpx.Response) -> float | None:
    """Retry-After in seconds, from either form the header may take."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    if value.strip().isdigit():
        # Kept as a float however long the digits (inf at worst): the retry policy's
        # max_delay caps it (cronwheel.lifecycle), so no answer can park a run for years.
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


class WebhookAction:
    """Sends webhook runs over one pooled client."""

    def __init__(
        self,
        secret: bytes,
        client: httpx.AsyncClient | None = None,
        *,
        metrics: _metrics.Metrics | None = None,
    ) -> None:
        self.secret = secret
        self.metrics = metrics or _metrics.default()
        self.client = client or httpx.AsyncClient(
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
            follow_redirects=False,
        )

    async def execute(self, action: Mapping[str, Any], ctx: RunContext, timeout: float) -> Outcome:
        body = request_body(action, ctx)
        method = str(action.get("method") or "POST").upper()
        url = mask_url(str(action["url"]))
        try:
            response = await self.client.request(
                method,
                str(action["url"]),
                content=body,
                headers=request_headers(action, ctx, body, self.secret),
                timeout=timeout,
            )
        except httpx.TimeoutException as exc:
            self.metrics.webhook_response("timeout")
            return Outcome(OutcomeKind.FAILED, "Timeout", redact(f"{method} {url}: {exc!r}"))
        except httpx.TransportError as exc:
            # Recorded in the run's history, which the API shows: no URL password.
            self.metrics.webhook_response("connection")
            return Outcome(
                OutcomeKind.FAILED, exc.__class__.__name__, redact(f"{method} {url}: {exc}")
            )
        self.metrics.webhook_response(response.status_code)
        return _without_secrets(outcome_of(response), action)

    async def close(self) -> None:
        await self.client.aclose()
