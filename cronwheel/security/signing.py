"""Webhook signatures: HMAC-SHA256 with a key of the tenant's own, over the run's
identity (tenant and job included) and the body. See docs/security.md.

Each tenant's requests are signed with its own key, derived from the operator's secret
(``CRONWHEEL_WEBHOOK_SECRET``) with HKDF-SHA256 (RFC 5869) and the tenant id::

    key = HKDF-SHA256(ikm=secret, salt="", info="cronwheel webhook signing v1:" + tenant id, L=32)

so a tenant's key signs nothing another tenant's receiver accepts, and one tenant's key
tells nothing of another's or of the secret. The operator gives each tenant its key
(:func:`tenant_key`, or ``cronwheel webhook-key TENANT``).

``Cronwheel-Signature: t=<unix seconds>,v2=<hex>``, the hex digest being
HMAC-SHA256(key, message) where the message is these lines, each ended by ``\\n``, then
the body::

    <t>
    <Cronwheel-Tenant-Id>
    <Cronwheel-Job-Id>
    <Cronwheel-Run-Id>
    <Cronwheel-Attempt>
    <Cronwheel-Fence>
    <Idempotency-Key>

The timestamp bounds replays; no identity field can be swapped between requests or
tenants. A receiver checks the signature with :func:`verify` and only then trusts the
tenant and job ids in the headers.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping

SIGNATURE_HEADER = "Cronwheel-Signature"
TENANT_ID_HEADER = "Cronwheel-Tenant-Id"
RUN_ID_HEADER = "Cronwheel-Run-Id"
JOB_ID_HEADER = "Cronwheel-Job-Id"
ATTEMPT_HEADER = "Cronwheel-Attempt"
FENCE_HEADER = "Cronwheel-Fence"
SCHEDULED_FOR_HEADER = "Cronwheel-Scheduled-For"
IDEMPOTENCY_HEADER = "Idempotency-Key"
SIGNED_HEADERS = (
    TENANT_ID_HEADER,
    JOB_ID_HEADER,
    RUN_ID_HEADER,
    ATTEMPT_HEADER,
    FENCE_HEADER,
    IDEMPOTENCY_HEADER,
)
"""The headers under the signature, in the order the message has them."""
VERSION = "v2"
"""The signature scheme's label in the header (v1 signed with one key for all tenants,
without the tenant and job ids)."""
KEY_INFO = b"cronwheel webhook signing v1:"


def hkdf_sha256(ikm: bytes, *, info: bytes, length: int = 32, salt: bytes = b"") -> bytes:
    """HKDF-SHA256 (RFC 5869): extract then expand."""
    if length > 255 * 32:
        raise ValueError("length: at most 8160 bytes")
    prk = hmac.new(salt or b"\x00" * 32, ikm, hashlib.sha256).digest()
    okm, block = b"", b""
    for counter in range(1, -(-length // 32) + 1):
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        okm += block
    return okm[:length]


def tenant_key(secret: bytes, tenant_id: str) -> bytes:
    """The key tenant ``tenant_id``'s webhooks are signed with, derived from the
    operator's ``secret``: give it to that tenant, for its receivers to verify with."""
    return hkdf_sha256(secret, info=KEY_INFO + tenant_id.encode())


def _digest(key: bytes, t: int, fields: tuple[str, ...], body: bytes) -> str:
    message = "".join(f"{f}\n" for f in (str(t), *fields)).encode() + body
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def sign(
    key: bytes,
    *,
    tenant_id: str,
    job_id: str,
    run_id: int,
    attempt: int,
    fence: int,
    idempotency_key: str,
    body: bytes,
    now: float | None = None,
) -> str:
    """The ``Cronwheel-Signature`` header value for one request; ``key`` is the tenant's
    (:func:`tenant_key`), not the operator's secret."""
    t = int(time.time() if now is None else now)
    fields = (tenant_id, job_id, str(run_id), str(attempt), str(fence), idempotency_key)
    return f"t={t},{VERSION}={_digest(key, t, fields, body)}"


def verify(
    secret_for_tenant: bytes | Callable[[str], bytes | None],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_seconds: float = 300.0,
    now: float | None = None,
) -> bool:
    """True if the request's headers carry a valid, fresh signature for ``body``.

    ``secret_for_tenant``: the key of the one tenant this receiver serves (bytes), or a
    function from the ``Cronwheel-Tenant-Id`` header to that tenant's key (None: an
    unknown tenant, refused). Once this is True, the tenant, job and run ids in the
    headers are cronwheel's: check that they are the ones the receiver expects."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        parts = dict(p.split("=", 1) for p in lowered[SIGNATURE_HEADER.lower()].split(","))
        t = int(parts["t"])
        given = parts[VERSION]
        fields = tuple(lowered[h.lower()] for h in SIGNED_HEADERS)
    except (KeyError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - t) > tolerance_seconds:
        return False
    key = (
        secret_for_tenant if isinstance(secret_for_tenant, bytes) else secret_for_tenant(fields[0])
    )
    if not key:
        return False
    return hmac.compare_digest(_digest(key, t, fields, body), given)
