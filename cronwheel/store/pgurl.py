"""PostgreSQL URLs with one host or several, as libpq writes them (decision 0050).

``postgresql://user@h1:5432,h2:5432/db?target_session_attrs=read-write`` names a primary
and its standbys: a connection tries the hosts in order and keeps the first that has the
session attributes asked for. cronwheel writes through ``--db``, so that URL connects to
the writable primary (``read-write`` unless it says ``primary``), whatever the number of
hosts; after a failover, every connection opened again finds the promoted standby. A read
replica's URL (``--read-replica``) connects to a standby (``prefer-standby`` unless it
says ``standby`` or ``read-only``).

Pure parsing, no driver: the CLI checks a URL before anything is opened, and an API over
SQLite never loads asyncpg.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, unquote, urlsplit

from cronwheel.errors import InvalidInput
from cronwheel.security.redact import mask_url

SESSION_ATTRS: Final = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
"""libpq's ``target_session_attrs`` values (asyncpg takes the same)."""
WRITABLE: Final = ("read-write", "primary", "any")
"""What ``--db`` may ask for: a server cronwheel can write to (``any`` at the user's word:
a standby reached through it is recognised and left, store.py)."""
READABLE: Final = ("prefer-standby", "standby", "read-only", "any")
"""What ``--read-replica`` may ask for."""
DEFAULT_PORT: Final = 5432

_IPV6: Final = re.compile(r"\[(?P<addr>[^\]]+)\](?::(?P<port>[^:]*))?")


@dataclass(frozen=True)
class PgUrl:
    """The hosts of a PostgreSQL URL, in order, and the session attributes it asks for."""

    hosts: tuple[tuple[str, int], ...]
    target_session_attrs: str | None

    @property
    def where(self) -> str:
        """``h1:5432,h2:5433``, for messages (no user, no password)."""
        return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.hosts)


def parse(url: str, field: str = "url") -> PgUrl:
    """The hosts and ``target_session_attrs`` of ``url``; :class:`InvalidInput` naming
    ``field`` (``url`` is ``--db``) when a host, a port or the attribute is malformed."""
    shown = mask_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidInput(field, f"{shown} is not a URL: {exc}") from None
    hostlist = parts.netloc.rpartition("@")[2]
    specs = hostlist.split(",") if hostlist else []
    hosts = tuple(_host(spec, i, len(specs), shown, field) for i, spec in enumerate(specs))
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise InvalidInput(field, f"{shown} has a malformed query string (after '?')") from None
    attrs = query.get("target_session_attrs")
    if attrs is not None and (len(attrs) != 1 or attrs[0] not in SESSION_ATTRS):
        raise InvalidInput(
            field,
            f"target_session_attrs={'&'.join(attrs)!s} in {shown} is not one of"
            f" {', '.join(SESSION_ATTRS)}",
        )
    return PgUrl(hosts or (("localhost", DEFAULT_PORT),), attrs[0] if attrs else None)


def _host(spec: str, index: int, count: int, shown: str, field: str) -> tuple[str, int]:
    which = f"host {index + 1} of {count}" if count > 1 else "the host"
    if spec.startswith("["):
        found = _IPV6.fullmatch(spec)
        if found is None:
            raise InvalidInput(field, f"{which} in {shown}, {spec!r}, is not an [IPv6]:port")
        addr, port = found["addr"], found["port"]
    else:
        addr, _, port = spec.partition(":")
        if ":" in port:
            raise InvalidInput(
                field, f"{which} in {shown}, {spec!r}, has two ':' (write an IPv6 as [addr]:port)"
            )
    if not addr:
        raise InvalidInput(
            field, f"{which} in {shown} is empty: write host:port, separated by commas"
        )
    if port is None or port == "":
        return unquote(addr), DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput(
            field, f"the port of {which} in {shown}, {port!r}, is not a number from 1 to 65535"
        )
    return unquote(addr), int(port)


def primary_attrs(url: str) -> str:
    """The ``target_session_attrs`` a ``--db`` connection uses: the URL's, else
    ``read-write``, so that a standby is never where cronwheel writes (one host or
    several: a name that moves to the new primary after a failover counts as several).
    A URL asking for a standby is refused: cronwheel would only fail to write."""
    attrs = parse(url).target_session_attrs
    if attrs is None:
        return "read-write"
    if attrs not in WRITABLE:
        raise InvalidInput(
            "url",
            f"target_session_attrs={attrs} would connect cronwheel to a standby, where it"
            " cannot write: use read-write (the writable primary) in the store URL, and"
            " give standbys to the API as --read-replica",
        )
    return attrs


def replica_attrs(url: str) -> str:
    """The ``target_session_attrs`` a ``--read-replica`` connection uses: the URL's,
    else ``prefer-standby``. ``read-only`` is taken as ``standby``: cronwheel opens its
    replica connections read-only itself, and every server, the primary too, would then
    pass a read-only check."""
    attrs = parse(url, "read_replica").target_session_attrs
    if attrs is None:
        return "prefer-standby"
    if attrs not in READABLE:
        raise InvalidInput(
            "read_replica",
            f"target_session_attrs={attrs} names the primary, which --db already is: use"
            " prefer-standby or read-only",
        )
    return "standby" if attrs == "read-only" else attrs


__all__ = ["PgUrl", "parse", "primary_attrs", "replica_attrs"]
