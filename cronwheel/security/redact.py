"""Secrets out of everything cronwheel shows: logs, error messages, API answers.

One place decides what a secret looks like, so that every printer agrees:

- a URL's password (``postgresql://user:SECRET@host/db`` → ``postgresql://user:***@host/db``),
  and a libpq ``password=...`` setting;
- the values a process was told are secret (its admin token, its webhook secret, its
  store's password), registered with :func:`register_secret` when it starts;
- the values of secret-bearing HTTP headers (:func:`is_secret_header`) in a webhook's
  ``headers``, masked in what the API shows of a job, never in what the worker sends.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

MASK: Final = "***"

# scheme://user:password@ — the user part has no ':', '/' or '@'; the password runs to
# the '@' (a literal '@' in a password must be percent-encoded in a URL).
_URL_PASSWORD: Final = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*):[^@\s]*@")
# libpq's key/value form: password=secret or password='se cret'.
_KV_PASSWORD: Final = re.compile(r"(?P<head>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\S+)", re.I)

# Headers whose value is a credential, whatever their spelling: any name containing one
# of these words (Authorization, Proxy-Authorization, X-Auth-Token, Cookie, Set-Cookie,
# X-Api-Key, X-Webhook-Secret, X-Signature…). Broad on purpose: a header masked needlessly
# costs a `***` in a listing, one missed leaks a credential. The CLI's job view
# (cronwheel.cli.describe) masks by the same words.
_SECRET_HEADER_WORDS: Final = (
    "auth",
    "token",
    "secret",
    "key",
    "cookie",
    "passw",
    "signature",
    "credential",
)

# How an encrypted value starts (cronwheel.security.sealing.PREFIX, which imports this module).
_SEALED: Final = "cwsealed:"

HEADERS: Final = ("headers", "secret_headers")

# Shorter values would mask innocent words; every real secret is longer.
_MIN_SECRET_LENGTH: Final = 6

_secrets: set[str] = set()
_lock = threading.Lock()
# The registered secrets, longest first (a secret containing another is masked whole),
# sorted once per change rather than on every log line; the set and size they are of.
_sorted: tuple[str, ...] = ()
_sorted_of: tuple[set[str] | None, int] = (None, 0)


def mask_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***``."""
    return _URL_PASSWORD.sub(rf"\g<head>:{MASK}@", url)


def url_password(url: str) -> str | None:
    """The password in ``url``, decoded, or None."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def forms_of(value: str) -> set[str]:
    """The forms a secret value sent in a request takes when a target echoes it back:
    the value; the credential after its scheme (``Bearer tok`` → ``tok``); for a
    ``Basic`` credential, what it decodes to (``user:password``) and the password; each
    of these in base64 (standard and URL-safe, padded or not) and percent-encoded."""
    found = {value}
    scheme, space, credential = value.strip().partition(" ")
    if space and credential.strip():
        found.add(credential.strip())
        if scheme.lower() == "basic":
            try:
                pair = base64.b64decode(credential.strip(), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                pair = ""
            if ":" in pair:
                found |= {pair, pair.partition(":")[2]}
    for plain in list(found):
        raw = plain.encode()
        for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
            found |= {encoded.decode(), encoded.decode().rstrip("=")}
        found.add(quote(plain, safe=""))
    return {f for f in found if len(f) >= _MIN_SECRET_LENGTH}


def url_secrets(url: str) -> set[str]:
    """Every form of ``url``'s password a request to it carries: the password as
    written (percent-encoded) and decoded, and the ``Authorization: Basic`` credential an
    HTTP client builds from the URL's user and password (base64 of ``user:password``),
    with :func:`forms_of` each."""
    try:
        parts = urlsplit(url)
        raw_user, raw_password = parts.username, parts.password
    except ValueError:
        return set()
    if not raw_password:
        return set()
    found: set[str] = set()
    for user, password in (
        (raw_user or "", raw_password),
        (unquote(raw_user or ""), unquote(raw_password)),
    ):
        found |= forms_of(password)
        basic = base64.b64encode(f"{user}:{password}".encode()).decode()
        found |= forms_of(f"Basic {basic}")
    return found


def register_secret(value: str | None) -> None:
    """Never show ``value`` again in this process (see :func:`redact`)."""
    if value and len(value) >= _MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(value)


def register_url(url: str | None) -> None:
    """Never show the password of ``url`` (decoded or percent-encoded) in this process."""
    if not url:
        return
    try:
        raw = urlsplit(url).password
    except ValueError:
        return
    if raw:
        register_secret(raw)
        register_secret(unquote(raw))


def _known() -> tuple[str, ...]:
    global _sorted, _sorted_of
    with _lock:
        if _sorted_of[0] is not _secrets or _sorted_of[1] != len(_secrets):
            _sorted = tuple(sorted(_secrets, key=len, reverse=True))
            _sorted_of = (_secrets, len(_secrets))
        return _sorted


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with URL passwords, ``password=`` settings, the registered secrets and
    ``extra`` masked."""
    # The cheap membership tests skip the regular expressions on most lines.
    if "://" in text:
        text = mask_url(text)
    if "=" in text:
        text = _KV_PASSWORD.sub(rf"\g<head>{MASK}", text)
    known = _known()
    if extra:
        more = {s for s in extra if len(s) >= _MIN_SECRET_LENGTH}
        known = tuple(sorted(set(known) | more, key=len, reverse=True))
    for secret in known:  # longest first: a secret containing another
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def is_secret_header(name: str) -> bool:
    """Whether a header's value is a credential: its name contains auth, token, secret,
    key, cookie, passw(ord), signature or credential (case-insensitive)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_HEADER_WORDS)


def mask_headers(headers: Mapping[str, Any], listed: Iterable[str] = ()) -> dict[str, Any]:
    """``headers`` with the values of secret headers replaced by ``***``: those
    :func:`is_secret_header` names, those ``listed`` (any case), and any value stored
    encrypted (cronwheel.security.sealing)."""
    named = {str(n).lower() for n in listed}
    return {
        k: MASK if is_secret_header(k) or k.lower() in named or str(v).startswith(_SEALED) else v
        for k, v in headers.items()
    }


def mask_action(action: Mapping[str, Any]) -> dict[str, Any]:
    """A job's action as it may be shown: a webhook's secret headers and URL password,
    a command's secret variables, masked. The stored action, which workers send, is unchanged."""
    shown = dict(action)
    # A command's env follows the webhook's headers' rules (cronwheel.security.sealing).
    values, listed_key = ("env", "secret_env") if shown.get("type") == "command" else HEADERS
    if isinstance(shown.get(values), Mapping):
        listed = shown.get(listed_key)
        names = [str(n) for n in listed] if isinstance(listed, list | tuple) else []
        shown[values] = mask_headers(shown[values], names)
    if isinstance(shown.get("url"), str):
        shown["url"] = mask_url(shown["url"])
    return shown


class RedactingFormatter(logging.Formatter):
    """A formatter whose lines, tracebacks included, pass through :func:`redact`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


__all__ = [
    "MASK",
    "RedactingFormatter",
    "forms_of",
    "is_secret_header",
    "mask_action",
    "mask_headers",
    "mask_url",
    "redact",
    "register_secret",
    "register_url",
    "url_password",
    "url_secrets",
]
