"""Webhook signatures per tenant: HKDF-derived keys, the tenant and job ids signed."""

from __future__ import annotations

import pytest

from cronwheel.actions import verify
from cronwheel.security.signing import hkdf_sha256, sign, tenant_key

SECRET = b"the operator's webhook secret"
NOW = 1_700_000_000.0


def test_hkdf_matches_rfc_5869_test_case_1() -> None:
    okm = hkdf_sha256(
        bytes.fromhex("0b" * 22),
        salt=bytes.fromhex("000102030405060708090a0b0c"),
        info=bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"),
        length=42,
    )
    assert okm.hex() == (
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
    )


def test_hkdf_matches_rfc_5869_test_case_3() -> None:  # no salt, no info
    okm = hkdf_sha256(bytes.fromhex("0b" * 22), info=b"", length=42)
    assert okm.hex() == (
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    )


def _request(key: bytes, tenant: str, job: str, body: bytes) -> dict[str, str]:
    """The headers a worker sends for one request of ``tenant``'s job ``job``."""
    idem = f"{job}:2026-01-01T00:00:00+00:00"
    return {
        "Cronwheel-Tenant-Id": tenant,
        "Cronwheel-Job-Id": job,
        "Cronwheel-Run-Id": "7",
        "Cronwheel-Attempt": "1",
        "Cronwheel-Fence": "1",
        "Idempotency-Key": idem,
        "Cronwheel-Signature": sign(
            key,
            tenant_id=tenant,
            job_id=job,
            run_id=7,
            attempt=1,
            fence=1,
            idempotency_key=idem,
            body=body,
            now=NOW,
        ),
    }


def test_each_tenant_has_its_own_key() -> None:
    a, b = tenant_key(SECRET, "acme"), tenant_key(SECRET, "bobco")
    assert len(a) == 32 and a != b and a != SECRET
    assert tenant_key(SECRET, "acme") == a  # derived, not stored: every worker agrees


def test_tenant_b_cannot_forge_tenant_a_s_webhook() -> None:
    key_a, key_b = tenant_key(SECRET, "acme"), tenant_key(SECRET, "bobco")
    body = b'{"event": "invoice.paid", "tenant": "acme"}'
    genuine = _request(key_a, "acme", "job-a", body)
    assert verify(key_a, genuine, body, now=NOW)
    # B's own request, whatever its body claims, does not verify under A's key...
    from_b = _request(key_b, "bobco", "job-b", body)
    assert not verify(key_a, from_b, body, now=NOW)
    # ...nor does B's signature relabelled with A's tenant and job ids.
    relabelled = {**from_b, "Cronwheel-Tenant-Id": "acme", "Cronwheel-Job-Id": "job-a"}
    assert not verify(key_a, relabelled, body, now=NOW)
    # A receiver serving many tenants looks the key up by the (signed) tenant id.
    keys = {"acme": key_a, "bobco": key_b}
    assert verify(keys.get, genuine, body, now=NOW)
    assert verify(keys.get, from_b, body, now=NOW)
    assert not verify(keys.get, relabelled, body, now=NOW)
    assert not verify(keys.get, {**genuine, "Cronwheel-Tenant-Id": "nobody"}, body, now=NOW)


@pytest.mark.parametrize(
    "change",
    [
        {"Cronwheel-Job-Id": "job-other"},
        {"Cronwheel-Run-Id": "8"},
        {"Cronwheel-Attempt": "2"},
        {"Cronwheel-Fence": "2"},
        {"Idempotency-Key": "job-a:2026-01-02T00:00:00+00:00"},
    ],
)
def test_every_identity_field_is_under_the_signature(change: dict[str, str]) -> None:
    key = tenant_key(SECRET, "acme")
    headers = _request(key, "acme", "job-a", b"{}")
    assert verify(key, headers, b"{}", now=NOW)
    assert not verify(key, headers | change, b"{}", now=NOW)


def test_a_stale_or_missing_signature_fails() -> None:
    key = tenant_key(SECRET, "acme")
    headers = _request(key, "acme", "job-a", b"{}")
    assert not verify(key, headers, b"{}", now=NOW + 301)
    assert not verify(key, {k: v for k, v in headers.items() if k != "Cronwheel-Tenant-Id"}, b"{}")
    old = headers["Cronwheel-Signature"].replace("v2=", "v1=")
    assert not verify(key, {**headers, "Cronwheel-Signature": old}, b"{}", now=NOW)
