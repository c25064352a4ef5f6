"""Where webhooks may go: the egress policy (docs/security.md).

Tenants are hostile: a webhook URL is a request the worker makes from inside the
operator's network. By default a webhook may reach only globally routable addresses:
loopback, link-local (cloud metadata at 169.254.169.254), private, shared (CGNAT),
unique-local, site-local, multicast, unspecified and reserved addresses are refused, in
every spelling a client would resolve (``2130706433``, ``0x7f000001``, percent-encoded
``%31%32%37.0.0.1``, fullwidth digits (U+FF11…), ideographic full stops ``127。0。0。1``,
an IPv6 address carrying an IPv4 one: ``[::127.0.0.1]``, ``[::ffff:127.0.0.1]``,
``[::ffff:0:a9fe:a9fe]``, NAT64's ``[64:ff9b::a9fe:a9fe]``…). An operator opens
exactly what they need with an allow-list of CIDRs and host names (``--webhook-allow``,
env ``CRONWHEEL_WEBHOOK_ALLOW``).

The policy is enforced twice. At creation (the HTTP API) a URL whose host is a
forbidden literal address or a name that is internal by definition (``localhost``,
``*.internal``…) is refused with a 422 naming ``action.url``; no DNS is done there.
At connection time, in the worker, the host name is resolved, every address it
resolves to is checked, and the connection goes to the address that was checked (no
second resolution a DNS rebinding could change); TLS still verifies the URL's host
name. Redirects are never followed (``follow_redirects=False``): a 3xx is a permanent
failure of the attempt, so no hop can lead elsewhere.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import ssl
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from cronwheel.errors import CronwheelError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOW_ENV = "CRONWHEEL_WEBHOOK_ALLOW"
LOOPBACK = ("127.0.0.0/8", "::1/128")
"""What ``cronwheel dev`` (and a test) allows so that webhooks reach this machine."""

REFUSED = "connection refused: the address is not allowed for webhooks"
"""What a tenant is told of a refused target: no port, no address, no scanning detail."""

# Names that are internal by definition, whatever they resolve to: refused at creation
# without a DNS lookup (the worker's check after resolution catches every other name).
_INTERNAL_NAMES = frozenset({"localhost", "metadata.google.internal", "metadata.goog"})
_INTERNAL_SUFFIXES = (".localhost", ".internal", ".local", ".home.arpa")
# An IPv4 address in one of the spellings inet_aton accepts (2130706433, 0x7f000001,
# 0177.1, 127.1): resolvers take them, so the policy must read them as addresses.
_NUMERIC_HOST = re.compile(r"^[0-9a-fA-FxX.]+$")


class EgressRefused(CronwheelError):
    """A webhook's target is not allowed by the worker's egress policy. Not an httpcore
    error on purpose: httpx lets it through unchanged, so the worker can tell a refusal
    (permanent) from a network failure (retried)."""


# The full stops IDNA (UTS #46) reads as ".", after NFKC (which folds U+FF0E itself and
# U+FF61 to U+3002): a resolver, a browser or curl given 127。0。0。1 connects to 127.0.0.1.
_FULL_STOPS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def normal_host(host: str) -> str:
    """``host`` as a client resolves it: percent-decoded (until nothing is left to
    decode), Unicode compatibility forms folded (NFKC: fullwidth digits and letters are
    ASCII ones), IDNA's full stops (U+3002, U+FF0E, U+FF61) read as ``.``, lower case,
    without brackets or a trailing dot."""
    for _ in range(4):  # bounded: "%2531" is "%31" once decoded, then "1"
        decoded = unquote(host)
        if decoded == host:
            break
        host = decoded
    host = unicodedata.normalize("NFKC", host).translate(_FULL_STOPS)
    return host.strip().strip("[]").rstrip(".").lower()


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an IP address if it is one in any spelling a resolver accepts
    (``[::1]``, ``::ffff:127.0.0.1``, ``2130706433``, ``0x7f.1``, ``%31%32%37.0.0.1``,
    ``127。0。0。1``; see :func:`normal_host`), else None."""
    host = normal_host(host)
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    if not _NUMERIC_HOST.match(host) or not any(c.isdigit() for c in host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _low_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and may be routed to: mapped
    (``::ffff:a.b.c.d``), compatible (``::a.b.c.d``, deprecated), translated
    (``::ffff:0:a.b.c.d``), 6to4, Teredo, NAT64 (``64:ff9b::/96``, and the local-use
    ``64:ff9b:1::/48`` with the address in its last 32 bits)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if any(ip in network for network in _CARRIES_IPV4_LOW):
        return _low_ipv4(ip)
    return None


_CARRIES_IPV4_LOW = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/96",  # IPv4-compatible (RFC 4291, deprecated; :: and ::1 included)
        "::ffff:0:0:0/96",  # IPv4-translated (SIIT, RFC 2765)
        "64:ff9b::/96",  # NAT64's well-known prefix (RFC 6052)
        "64:ff9b:1::/48",  # NAT64 for local use (RFC 8215)
    )
)
_NEVER_GLOBAL = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "64:ff9b:1::/48",  # local-use NAT64: not routed on the internet, whatever it embeds
        "fec0::/10",  # site-local (deprecated by RFC 3879, still routed inside some sites)
    )
)


def is_forbidden(ip: IPAddress) -> bool:
    """Whether ``ip`` is not a globally routable unicast address (loopback, link-local,
    private, shared, unique-local, site-local, multicast, unspecified, reserved…), by
    default refused for webhooks. An IPv6 address carrying an IPv4 one is judged by
    both."""
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _NEVER_GLOBAL):
            return True
        inner = _embedded_ipv4(ip)
        if inner is not None and is_forbidden(inner):
            return True
    return ip.is_multicast or not ip.is_global


def _normal_name(host: str) -> str:
    return normal_host(host)


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Which webhook targets are allowed beyond the public internet: ``networks`` (CIDRs)
    and ``hosts`` (exact names, lower case). The default allows nothing internal."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """A policy from allow-list entries: each a CIDR (``10.1.0.0/16``), an address
        (``10.1.2.3``) or a host name (``billing.svc``); commas also separate entries.
        ValueError naming the entry that is neither."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for raw in entries:
            for entry in (e.strip() for e in raw.split(",")):
                if not entry:
                    continue
                try:
                    networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                    continue
                except ValueError:
                    pass
                name = _normal_name(entry)
                if "/" in name or not re.fullmatch(r"[a-z0-9_.-]+", name):
                    raise ValueError(
                        f"{entry!r} is neither a CIDR (10.0.0.0/8), an address nor a host name"
                    )
                hosts.add(name)
        return cls(tuple(networks), frozenset(hosts))

    @classmethod
    def from_env(cls, *entries: str) -> EgressPolicy:
        """``entries`` plus those of env ``CRONWHEEL_WEBHOOK_ALLOW`` (comma-separated)."""
        return cls.parse([*entries, os.environ.get(ALLOW_ENV, "")])

    def also(self, *entries: str) -> EgressPolicy:
        """This policy with more entries allowed (e.g. :data:`LOOPBACK`)."""
        more = EgressPolicy.parse(entries)
        return EgressPolicy(self.networks + more.networks, self.hosts | more.hosts)

    @property
    def allows_loopback(self) -> bool:
        return self.address_allowed(ipaddress.IPv4Address("127.0.0.1"))

    def describe(self) -> str:
        """The allow-list as an operator wrote it, for a startup log line."""
        items = [str(n) for n in self.networks] + sorted(self.hosts)
        return ", ".join(items) if items else "nothing internal"

    def address_allowed(self, ip: IPAddress) -> bool:
        """Whether a connection to ``ip`` is allowed."""
        candidates: list[IPAddress] = [ip]
        if isinstance(ip, ipaddress.IPv6Address):
            inner = _embedded_ipv4(ip)
            if inner is not None:
                candidates.append(inner)
        for candidate in candidates:
            if any(candidate in network for network in self.networks):
                return True
        return not is_forbidden(ip)

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` is allowed by name (then its addresses are not checked)."""
        return _normal_name(host) in self.hosts

    def url_refusal(self, url: str) -> str | None:
        """Why a webhook URL is refused at creation, or None. Only what needs no DNS: a
        literal forbidden address, or a name internal by definition (the worker checks
        every other name after resolving it)."""
        host = urlsplit(url).hostname
        if host is None:
            return None
        if self.host_allowed(host):
            return None
        name = normal_host(host)
        if any(unicodedata.category(c) in ("Cc", "Cs") or c in "/\\@" for c in name):
            # A resolver would stop at the NUL (127.0.0.1%00.example.com), or read it as
            # another URL: no host name has these.
            return f"{host!r} is not a host name"
        ip = literal_address(host)
        if ip is not None:
            if self.address_allowed(ip):
                return None
            read = "" if str(ip) == host.strip("[]").lower() else f" (read as {ip})"
            return (
                f"{host} is an internal address{read}, not allowed for webhooks"
                " (an operator can allow it with --webhook-allow; docs/security.md)"
            )
        if name in _INTERNAL_NAMES or name.endswith(_INTERNAL_SUFFIXES):
            if self.allows_loopback and (name == "localhost" or name.endswith(".localhost")):
                return None
            return (
                f"{host} is an internal host name, not allowed for webhooks"
                " (an operator can allow it with --webhook-allow; docs/security.md)"
            )
        return None


def is_tls_error(exc: BaseException) -> bool:
    """Whether a connection failed in TLS (a certificate, a protocol mismatch)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError | ssl.CertificateError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def origin_of(url: str) -> str:
    """A URL's target as the worker counts connections: ``scheme://host:port``, the port
    spelled out (a URL that does not parse is its own target)."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or (443 if scheme == "https" else 80)
        return f"{scheme}://{(parts.hostname or '').lower()}:{port}"
    except ValueError:
        return url
