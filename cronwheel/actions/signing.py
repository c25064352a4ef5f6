"""Webhook signatures: HMAC-SHA256 over the run's identity and the body.

A target verifies a request with :func:`verify` (or the same few lines in any language):
``Cronwheel-Signature: t=<unix seconds>,v1=<hex>`` where the hex digest is
HMAC-SHA256(secret, "<t>.<run id>.<attempt>.<fence>.<idempotency key>." + body). The
timestamp bounds replays; the identity fields cannot be swapped between requests.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

SIGNATURE_HEADER = "Cronwheel-Signature"
RUN_ID_HEADER = "Cronwheel-Run-Id"
JOB_ID_HEADER = "Cronwheel-Job-Id"
ATTEMPT_HEADER = "Cronwheel-Attempt"
FENCE_HEADER = "Cronwheel-Fence"
SCHEDULED_FOR_HEADER = "Cronwheel-Scheduled-For"
IDEMPOTENCY_HEADER = "Idempotency-Key"


def _digest(secret: bytes, t: int, fields: tuple[str, str, str, str], body: bytes) -> str:
    message = f"{t}.{'.'.join(fields)}.".encode() + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign(
    secret: bytes,
    *,
    run_id: int,
    attempt: int,
    fence: int,
    idempotency_key: str,
    body: bytes,
    now: float | None = None,
) -> str:
    """The ``Cronwheel-Signature`` header value for one request."""
    t = int(time.time() if now is None else now)
    fields = (str(run_id), str(attempt), str(fence), idempotency_key)
    return f"t={t},v1={_digest(secret, t, fields, body)}"


def verify(
    secret: bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_seconds: float = 300.0,
    now: float | None = None,
) -> bool:
    """True if the request's headers carry a valid, fresh signature for ``body``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        parts = dict(p.split("=", 1) for p in lowered[SIGNATURE_HEADER.lower()].split(","))
        t = int(parts["t"])
        fields = tuple(
            lowered[h.lower()]
            for h in (RUN_ID_HEADER, ATTEMPT_HEADER, FENCE_HEADER, IDEMPOTENCY_HEADER)
        )
    except (KeyError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - t) > tolerance_seconds:
        return False
    expected = _digest(secret, t, fields, body)  # type: ignore[arg-type]
    return hmac.compare_digest(expected, parts.get("v1", ""))
