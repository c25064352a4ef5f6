"""What counts as a secret, and how it is masked (cronwheel.security.redact)."""

from __future__ import annotations

import io
import logging

import pytest

from cronwheel.security import redact
from cronwheel.security.redact import (
    MASK,
    RedactingFormatter,
    is_secret_header,
    mask_action,
    mask_headers,
    mask_url,
    register_secret,
    register_url,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://postgres:s3cret@db:5432/cw", "postgresql://postgres:***@db:5432/cw"),
        ("postgres://u:p%40ss%2Fw@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("https://bot:tok/en@example.com/hook", "https://bot:***@example.com/hook"),
        ("postgresql://postgres@127.0.0.1/cw", "postgresql://postgres@127.0.0.1/cw"),
        ("sqlite:////var/lib/cw.db", "sqlite:////var/lib/cw.db"),
        ("http://example.com/a:b@c", "http://example.com/a:b@c"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_redact_masks_urls_inside_text_and_libpq_passwords() -> None:
    text = "cannot connect to postgresql://a:xyz123@h/db (host=h password=xyz123 user=a)"
    shown = redact.redact(text)
    assert "xyz123" not in shown
    assert "postgresql://a:***@h/db" in shown and "password=***" in shown


def test_registered_secrets_are_masked_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_secrets", set())
    register_secret("admin-token-0123456789")
    register_url("postgresql://u:p%40ssword@h/db")
    register_secret("abc")  # too short to mask without masking words
    shown = redact.redact("token admin-token-0123456789, raw p%40ssword, decoded p@ssword, abc")
    assert shown == f"token {MASK}, raw {MASK}, decoded {MASK}, abc"
    assert redact.redact("Bearer other-secret-value", extra=["other-secret-value"]) == (
        f"Bearer {MASK}"
    )


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "proxy-authorization",
        "Cookie",
        "Set-Cookie",
        "X-Auth-Token",
        "X-Api-Key",
        "apikey",
        "X-Webhook-Secret",
        "X-Password",
        "X-Signature",
        "X-Amz-Security-Token",
        "Idempotency-Key",
    ],
)
def test_secret_headers(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize("name", ["Content-Type", "Accept", "X-Request-Id", "User-Agent"])
def test_ordinary_headers(name: str) -> None:
    assert not is_secret_header(name)


def test_mask_action_leaves_the_stored_action_alone() -> None:
    action = {
        "type": "webhook",
        "url": "https://u:pw@example.com/hook",
        "headers": {"Authorization": "Bearer t0ken", "Content-Type": "text/plain"},
    }
    shown = mask_action(action)
    assert shown["headers"] == {"Authorization": MASK, "Content-Type": "text/plain"}
    assert shown["url"] == "https://u:***@example.com/hook"
    assert action["headers"]["Authorization"] == "Bearer t0ken"  # type: ignore[index]
    assert mask_action({"type": "handler", "name": "x"}) == {"type": "handler", "name": "x"}
    assert mask_headers({}) == {}


def test_the_formatter_masks_messages_and_tracebacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_secrets", set())
    register_secret("webhook-secret-42")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(RedactingFormatter("%(message)s"))
    log = logging.getLogger("test_redact")
    log.addHandler(handler)
    try:
        try:
            raise RuntimeError("postgresql://u:hunter22@h/db and webhook-secret-42")
        except RuntimeError:
            log.exception("failed on %s", "postgresql://u:hunter22@h/db")
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert "RuntimeError" in text
    assert "hunter22" not in text and "webhook-secret-42" not in text
