"""Secret webhook headers, encrypted at rest with the operator's key (decision 0026).

A webhook's header is secret when its name looks like a credential
(:func:`cronwheel.security.redact.is_secret_header`: Authorization, Cookie, X-Api-Key, anything
with auth, token, secret, key, cookie, passw, signature or credential in it) or when the
action lists it in ``secret_headers``. Its value is stored *sealed*: the text
``cwsealed:1:`` followed by a Fernet token (AES-128-CBC + HMAC-SHA256, from the
``cryptography`` package) of ``[tenant id, value]``. The tenant id inside the token
binds the value to its tenant: a sealed value copied into another tenant's job opens
for nobody. A webhook URL's password (``https://user:pass@host/``) is sealed the same
way, in its place in the URL (``user:cwsealed1.<token>@host``).

The key is ``CRONWHEEL_SECRETS_KEY`` (or ``--secrets-key``): one or more Fernet keys,
comma-separated. The first seals; every one opens (MultiFernet), so a key is rotated by
putting a new one first, running ``cronwheel secrets rotate`` (every sealed value is
sealed again with the new key), then removing the old one.

Who does what: the API and the Python API seal what they store (no key: a secret header
is refused, never stored in plain text); reads show ``***``; only the worker opens a
value, just before it sends the request.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit, urlunsplit

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from cronwheel.errors import InvalidInput
from cronwheel.security.egress import origin_of
from cronwheel.security.redact import (
    MASK,
    forms_of,
    is_secret_header,
    mask_url,
    register_secret,
    url_secrets,
)

ENV: Final = "CRONWHEEL_SECRETS_KEY"
PREFIX: Final = "cwsealed:1:"
"""How a sealed value starts; a value a user sends may not (it would not be theirs)."""
URL_PREFIX: Final = "cwsealed1."
"""How a sealed URL password starts: the password of a webhook URL
(``https://user:pass@host/``) is stored in its place, sealed, in characters a URL's
user-info may hold (the Fernet token is URL-safe base64)."""
KEY_FILE_SUFFIX: Final = ".secrets-key"
"""``cronwheel dev``'s key, beside its SQLite file when no key is configured."""
_OPENED_CACHE: Final = 4096


class SecretsKeyMissing(Exception):
    """A sealed value, and no key to open it with."""


class SecretUnreadable(Exception):
    """A sealed value that none of the keys opens (or another tenant's)."""


def generate_key() -> str:
    """A new Fernet key (URL-safe base64 of 32 random bytes)."""
    return Fernet.generate_key().decode()


class Sealer:
    """Seals and opens secret values with a list of keys: the first seals, all open."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.keys = [k.strip() for k in keys if k.strip()]
        if not self.keys:
            raise ValueError(f"{ENV}: no key given")
        fernets = []
        for i, key in enumerate(self.keys):
            try:
                fernets.append(Fernet(key.encode()))
            except (ValueError, TypeError):
                raise ValueError(
                    f"{ENV}: key {i + 1} is not a Fernet key (44 characters of URL-safe"
                    " base64, as `cronwheel secrets new-key` prints)"
                ) from None
        self._fernet = MultiFernet(fernets)
        self._opened: dict[tuple[str, str], str] = {}
        for key in self.keys:
            register_secret(key)  # never printed by this process

    @classmethod
    def from_text(cls, text: str) -> Sealer:
        """``KEY1,KEY2,…``: the first seals."""
        return cls(text.split(","))

    @classmethod
    def from_env(cls) -> Sealer | None:
        """The sealer of ``CRONWHEEL_SECRETS_KEY``, or None if it is not set."""
        text = os.environ.get(ENV, "").strip()
        return cls.from_text(text) if text else None

    def seal(self, value: str, tenant_id: str) -> str:
        token = self._fernet.encrypt(json.dumps([tenant_id, value]).encode())
        return PREFIX + token.decode()

    def open(self, sealed: str, tenant_id: str) -> str:
        """The value ``sealed`` holds; SecretUnreadable if no key opens it or it is
        another tenant's. Opened values are remembered (a cron job sends the same header
        every minute)."""
        cached = self._opened.get((tenant_id, sealed))
        if cached is not None:
            return cached
        try:
            owner, value = json.loads(self._fernet.decrypt(sealed.removeprefix(PREFIX).encode()))
        except (InvalidToken, ValueError, TypeError):
            raise SecretUnreadable("none of the secrets keys opens it") from None
        if owner != tenant_id or not isinstance(value, str):
            raise SecretUnreadable("it was sealed for another tenant") from None
        if len(self._opened) >= _OPENED_CACHE:
            self._opened.clear()
        self._opened[(tenant_id, sealed)] = value
        return value

    def reseal(self, sealed: str) -> str:
        """``sealed`` sealed again with the first key (``MultiFernet.rotate``)."""
        token = self._fernet.rotate(sealed.removeprefix(PREFIX).encode())
        return PREFIX + token.decode()

    def sealed_with_first(self, sealed: str) -> bool:
        """Whether the first key opens ``sealed`` (rotation is done for it)."""
        try:
            Fernet(self.keys[0].encode()).decrypt(sealed.removeprefix(PREFIX).encode())
        except InvalidToken:
            return False
        return True


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(PREFIX)


def _url_password(url: str) -> tuple[SplitResult, str, str, str] | None:
    """``url``'s parts, user, password (as written, percent-encoded) and host part, if
    it has a password."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    userinfo, at, host = parts.netloc.rpartition("@")
    user, colon, password = userinfo.partition(":")
    if not at or not colon or not password:
        return None
    return parts, user, password, host


def _with_password(parts: SplitResult, user: str, password: str, host: str) -> str:
    return urlunsplit(parts._replace(netloc=f"{user}:{password}@{host}"))


def _seal_url(url: str, tenant_id: str, sealer: Sealer | None, field: str) -> str:
    found = _url_password(url)
    if found is None or found[2].startswith(URL_PREFIX):
        return url
    if sealer is None:
        raise InvalidInput(
            f"{field}.url",
            f"has a password, and this server has no secrets key to store it encrypted:"
            f" the operator sets {ENV} (docs/security.md#secrets-at-rest)",
        )
    parts, user, password, host = found
    sealed = URL_PREFIX + sealer.seal(password, tenant_id).removeprefix(PREFIX)
    return _with_password(parts, user, sealed, host)


def _open_url(url: str, tenant_id: str, sealer: Sealer | None) -> str:
    found = _url_password(url)
    if found is None or not found[2].startswith(URL_PREFIX):
        return url
    if sealer is None:
        raise SecretsKeyMissing(
            f"the URL's password is encrypted and this worker has no secrets key: start it"
            f" with {ENV} (the key the API sealed it with)"
        )
    parts, user, password, host = found
    try:
        plain = sealer.open(PREFIX + password.removeprefix(URL_PREFIX), tenant_id)
    except SecretUnreadable as exc:
        raise SecretUnreadable(
            f"the URL's password cannot be decrypted ({exc}): give this worker's {ENV} the"
            " key the API sealed it with"
        ) from None
    return _with_password(parts, user, plain, host)


SECRET_FIELDS: Final = {"webhook": ("headers", "secret_headers"), "command": ("env", "secret_env")}
"""Per action type, the mapping whose values may be secret, and the list naming more of
them: a webhook's headers, a command's environment (the same rules for both)."""


def _fields(action: Mapping[str, Any]) -> tuple[str, str]:
    """The action's secret-bearing mapping and its list (a webhook's by default)."""
    return SECRET_FIELDS.get(str(action.get("type")), SECRET_FIELDS["webhook"])


def secret_names(action: Mapping[str, Any]) -> set[str]:
    """The (lowercased) names of the action's secret headers (a command's: variables)."""
    values, listed_key = _fields(action)
    headers = action.get(values)
    if not isinstance(headers, Mapping):
        return set()
    listed = {str(n).lower() for n in action.get(listed_key) or ()}
    return {str(k).lower() for k in headers if is_secret_header(str(k)) or str(k).lower() in listed}


def sent_secrets(action: Mapping[str, Any], stored: Mapping[str, Any] | None = None) -> set[str]:
    """Every secret value an (opened) webhook ``action`` is sent with, in every form a
    target may echo it back (:func:`cronwheel.security.redact.forms_of`): its secret
    headers' values (those ``stored`` kept sealed, too), its URL's password and the
    ``Basic`` credential made of it. What a worker redacts from anything it records or
    logs of the answer."""
    key = _fields(action)[0]
    headers = action.get(key)
    names = secret_names(action)
    if stored is not None and isinstance(stored.get(key), Mapping):
        names |= {str(k).lower() for k, v in stored[key].items() if is_sealed(v)}
    found: set[str] = set()
    if isinstance(headers, Mapping):
        for name, value in headers.items():
            if str(name).lower() in names and isinstance(value, str):
                found |= forms_of(value)
    return found | url_secrets(str(action.get("url") or ""))


def seal_notify(
    targets: Iterable[Mapping[str, Any]], tenant_id: str, sealer: Sealer | None
) -> tuple[Mapping[str, Any], ...]:
    """A job's or a pipeline's notification targets with their URLs' passwords sealed
    (refused without a sealer: InvalidInput naming ``notify.N.url``)."""
    out = []
    for j, target in enumerate(targets):
        url = str(target.get("url") or "")
        sealed = _seal_url(url, tenant_id, sealer, f"notify.{j}")
        out.append(target if sealed == url else {**target, "url": sealed})
    return tuple(out)


def open_url(url: str, tenant_id: str, sealer: Sealer | None) -> str:
    """``url`` with its sealed password opened (SecretsKeyMissing, SecretUnreadable)."""
    return _open_url(url, tenant_id, sealer) if URL_PREFIX in url else url


def reseal_notify(
    targets: Iterable[Mapping[str, Any]], tenant_id: str, sealer: Sealer
) -> tuple[Mapping[str, Any], ...] | None:
    """The targets with their URL passwords on the first key (plain ones sealed); None
    if nothing changes."""
    out, changed = [], False
    for target in targets:
        resealed = reseal_action(
            {"type": "webhook", "url": str(target.get("url") or "")}, tenant_id, sealer
        )
        changed |= resealed is not None
        out.append(target if resealed is None else {**target, "url": resealed["url"]})
    return tuple(out) if changed else None


def keep_masked_notify(
    new: Iterable[Mapping[str, Any]], current: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``new`` targets whose URL is a current target's as shown (``user:***@``) get the
    stored URL back."""
    stored = {mask_url(str(t.get("url") or "")): str(t.get("url") or "") for t in current}
    kept = []
    for target in new:
        url = str(target.get("url") or "")
        if url in stored and stored[url] != url:
            target = {**target, "url": stored[url]}
        kept.append(target)
    return kept


def refuse_sealed(action: Mapping[str, Any], field: str = "action") -> None:
    """InvalidInput if a header value or URL password a user sent looks sealed: only
    cronwheel seals."""
    found = _url_password(str(action.get("url") or ""))
    if found is not None and found[2].startswith(URL_PREFIX):
        raise InvalidInput(f"{field}.url", f"a password may not start with {URL_PREFIX!r}")
    key = _fields(action)[0]
    for name, value in dict(action.get(key) or {}).items():
        if is_sealed(value):
            raise InvalidInput(f"{field}.{key}.{name}", f"a value may not start with {PREFIX!r}")


def seal_action(
    action: Mapping[str, Any], tenant_id: str, sealer: Sealer | None, field: str = "action"
) -> Mapping[str, Any]:
    """The action with every secret header's value, and its URL's password, sealed
    (sealed ones kept). Without a sealer, either is refused (InvalidInput naming it):
    never stored in plain text."""
    if action.get("type") not in SECRET_FIELDS:
        return action
    url = str(action.get("url") or "")
    sealed_url = _seal_url(url, tenant_id, sealer, field)
    if sealed_url != url:
        action = {**action, "url": sealed_url}
    key = _fields(action)[0]
    names = secret_names(action)
    headers = dict(action.get(key) or {})
    todo = [k for k, v in headers.items() if k.lower() in names and not is_sealed(v)]
    if not todo:
        return action
    if sealer is None:
        what = "header" if key == "headers" else "variable"
        raise InvalidInput(
            f"{field}.{key}.{todo[0]}",
            f"is a secret {what}, and this server has no secrets key to store it encrypted:"
            f" the operator sets {ENV} (docs/security.md#secrets-at-rest)",
        )
    for name in todo:
        headers[name] = sealer.seal(str(headers[name]), tenant_id)
    return {**action, key: headers}


def open_action(
    action: Mapping[str, Any], tenant_id: str, sealer: Sealer | None
) -> Mapping[str, Any]:
    """The action with its sealed values opened, to be sent. SecretsKeyMissing (no
    sealer) or SecretUnreadable, each naming the header (or the URL)."""
    url = action.get("url")
    if isinstance(url, str) and URL_PREFIX in url:
        opened_url = _open_url(url, tenant_id, sealer)
        if opened_url != url:
            action = {**action, "url": opened_url}
    key = _fields(action)[0]
    what = "header" if key == "headers" else "variable"
    headers = action.get(key)
    if not isinstance(headers, Mapping) or not any(is_sealed(v) for v in headers.values()):
        return action
    opened = {}
    for name, value in headers.items():
        if not is_sealed(value):
            opened[name] = value
            continue
        if sealer is None:
            raise SecretsKeyMissing(
                f"the {what} {name} is encrypted and this worker has no secrets key:"
                f" start it with {ENV} (the key the API sealed it with)"
            )
        try:
            opened[name] = sealer.open(value, tenant_id)
        except SecretUnreadable as exc:
            raise SecretUnreadable(
                f"the {what} {name} cannot be decrypted ({exc}): give this worker's {ENV}"
                " the key the API sealed it with"
            ) from None
    return {**action, key: opened}


def keep_masked(
    new: Mapping[str, Any], current: Mapping[str, Any], field: str = "action"
) -> Mapping[str, Any]:
    """``new`` with each secret header sent as ``***`` given the value ``current`` has
    under that name, and a URL read masked (``user:***@``) given ``current``'s: a job
    read (masked) and sent back keeps its secrets.

    A stored value is carried only to the destination it was given for: a header sent
    as ``***`` while the URL's origin (scheme, host, port) changes is refused
    (InvalidInput naming ``field.headers.<name>``), as a URL's password is kept only for
    the URL as read. Else a key that may write but not read the secret could PATCH the
    URL to a receiver of its own and be sent the secret in clear."""
    current_url = str(current.get("url") or "")
    if new.get("url") == mask_url(current_url) and new.get("url") != current_url:
        new = {**new, "url": current_url}
    key = _fields(new)[0]
    headers = new.get(key)
    old = current.get(key)
    if not isinstance(headers, Mapping) or not isinstance(old, Mapping):
        return new
    by_name = {str(k).lower(): v for k, v in old.items()}
    carried = [k for k, v in headers.items() if v == MASK and by_name.get(k.lower(), MASK) != MASK]
    if carried and not same_destination(new, current):
        others = f" (so must {', '.join(carried[1:])})" if carried[1:] else ""
        raise InvalidInput(
            f"{field}.{key}.{carried[0]}",
            f"was sent as {MASK}, its stored value, but the destination changes"
            f" ({_destination(current)} → {_destination(new)}): a stored secret is not"
            f" sent to a new destination: send its value again{others}",
        )
    kept = {k: by_name[k.lower()] if k in carried else v for k, v in headers.items()}
    return {**new, key: kept}


def _destination(action: Mapping[str, Any]) -> str:
    """Where an action sends its request: its type, and a webhook's URL's origin; a
    command's whole command line and directory (a secret variable kept for ``pg_dump``
    is not handed to ``printenv``)."""
    if action.get("type") == "command":
        return f"command {json.dumps(action.get('argv'))} in {action.get('cwd') or '/'}"
    if action.get("type") != "webhook":
        return str(action.get("type"))
    return mask_url(origin_of(str(action.get("url") or "")))  # a URL that does not parse


def same_destination(new: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether ``new`` sends its request where ``current`` does: the same action type
    and, for a webhook, the same origin (scheme, host, port: ``https://a.example`` is
    ``https://A.example:443``); a path or query may change."""
    return _destination(new) == _destination(current)


def reseal_action(
    action: Mapping[str, Any], tenant_id: str, sealer: Sealer
) -> Mapping[str, Any] | None:
    """The action with every sealed value sealed again with the first key, and plain
    secrets (stored before sealing existed) sealed; None if nothing changes."""
    if action.get("type") not in SECRET_FIELDS:
        return None
    key = _fields(action)[0]
    names = secret_names(action)
    headers = dict(action.get(key) or {})
    changed = False
    url = str(action.get("url") or "")
    found = _url_password(url)
    if found is not None:
        parts, user, password, host = found
        if not password.startswith(URL_PREFIX):
            url = _seal_url(url, tenant_id, sealer, "action")
            changed = True
        elif not sealer.sealed_with_first(PREFIX + password.removeprefix(URL_PREFIX)):
            token = sealer.reseal(PREFIX + password.removeprefix(URL_PREFIX))
            url = _with_password(parts, user, URL_PREFIX + token.removeprefix(PREFIX), host)
            changed = True
    for name, value in headers.items():
        if is_sealed(value):
            if not sealer.sealed_with_first(value):
                headers[name] = sealer.reseal(value)
                changed = True
        elif name.lower() in names:
            headers[name] = sealer.seal(str(value), tenant_id)
            changed = True
    if not changed:
        return None
    resealed = {**action, key: headers}
    return {**resealed, "url": url} if "url" in action else resealed


def dev_sealer(db_path: str, configured: Sealer | None) -> tuple[Sealer, str]:
    """``cronwheel dev``'s sealer and where its key is: the configured one; else the
    key file beside the SQLite file, created (mode 0600) on the first start; for an
    in-memory store, a key of this process only."""
    if configured is not None:
        return configured, ENV
    if db_path == ":memory:":
        return Sealer([generate_key()]), "a key of this process (in-memory store)"
    path = key_file(db_path)
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(generate_key() + "\n")
    return Sealer.from_text(path.read_text().strip()), str(path)


def key_file(db_path: str) -> Path:
    """Where ``cronwheel dev`` keeps the key of the SQLite file ``db_path``."""
    return Path(db_path + KEY_FILE_SUFFIX)


def file_sealer(db_path: str) -> Sealer | None:
    """The sealer of the key file beside SQLite file ``db_path``, if there is one."""
    path = key_file(db_path)
    return Sealer.from_text(path.read_text().strip()) if path.exists() else None


__all__ = [
    "ENV",
    "PREFIX",
    "URL_PREFIX",
    "Sealer",
    "SecretUnreadable",
    "SecretsKeyMissing",
    "dev_sealer",
    "file_sealer",
    "generate_key",
    "is_sealed",
    "keep_masked",
    "keep_masked_notify",
    "open_action",
    "open_url",
    "refuse_sealed",
    "reseal_action",
    "reseal_notify",
    "same_destination",
    "seal_action",
    "seal_notify",
    "secret_names",
    "sent_secrets",
]
