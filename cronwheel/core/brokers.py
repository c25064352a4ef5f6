"""Message brokers as the domain sees them: their kinds, the URL schemes that name them,
and what a publish action's ``to`` must look like on each. Pure: the clients are in
:mod:`cronwheel.actions.publish`, and the API checks a job with these rules alone.

A new kind (Kafka: ``kafka://``) is one entry in :data:`KINDS` and :data:`SCHEMES`, a
rule in :func:`target_problem`, and a client module in ``cronwheel/actions/publish/``
(docs/actions.md#adding-a-broker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

BROKER_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
"""How an operator names a broker (``--broker events=nats://…``) and a job refers to it."""


@dataclass(frozen=True, slots=True)
class BrokerKind:
    """One kind of broker: its name in the API (``nats``), the extra that installs its
    client library (``pip install 'cronwheel[nats]'``), the module a worker imports, and
    what ``to`` names on it."""

    name: str
    extra: str
    library: str
    target: str


KINDS = {
    "nats": BrokerKind("nats", "nats", "nats", "a JetStream subject (orders.created)"),
    "rabbitmq": BrokerKind(
        "rabbitmq",
        "rabbitmq",
        "aio_pika",
        "exchange/routing key ('/QUEUE' for the default exchange)",
    ),
    "redis": BrokerKind("redis", "redis", "redis", "a stream's key"),
}
"""The kinds cronwheel publishes to, by name."""

SCHEMES = {
    "nats": "nats",
    "tls": "nats",
    "amqp": "rabbitmq",
    "amqps": "rabbitmq",
    "redis": "redis",
    "rediss": "redis",
}
"""URL scheme → kind (``tls://`` is NATS over TLS, as nats-server's own URLs spell it)."""

MAX_TARGET = 1024
_NATS_TOKEN = re.compile(r"^[^\s*>.]+$")
_EXCHANGE = re.compile(r"^[A-Za-z0-9_.:-]{0,255}$")  # RabbitMQ's exchange names, or "" (default)


def kind_of_url(url: str) -> BrokerKind:
    """The kind of broker ``url`` names; ValueError naming the schemes otherwise (the
    message never quotes the URL: it may carry a password)."""
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""
    if scheme not in SCHEMES:
        known = ", ".join(f"{s}://" for s in SCHEMES)
        raise ValueError(f"a broker URL starts with one of {known} (got {scheme or 'none'}://)")
    return KINDS[SCHEMES[scheme]]


def parse_broker(option: str) -> tuple[str, str, BrokerKind]:
    """``NAME=URL`` as ``--broker`` takes it: (name, url, kind); ValueError saying what is
    wrong, never quoting the URL."""
    name, sep, url = option.partition("=")
    name = name.strip()
    if not sep or not url:
        raise ValueError("write NAME=URL, e.g. events=nats://127.0.0.1:4222")
    if not BROKER_NAME.match(name):
        raise ValueError(f"{name!r}: a broker name is 1-64 letters, digits, '_', '.' or '-'")
    return name, url, kind_of_url(url)


def target_problem(kind: str, to: str) -> str | None:
    """Why ``to`` cannot be published to on a broker of ``kind``, or None."""
    if not to:
        return "is empty"
    if len(to) > MAX_TARGET:
        return f"is {len(to)} characters; the limit is {MAX_TARGET}"
    if kind == "nats":
        if not all(_NATS_TOKEN.match(token) for token in to.split(".")):
            return (
                f"{to!r} is not a NATS subject to publish to: dot-separated tokens,"
                " no spaces and no wildcard (* or >)"
            )
    elif kind == "rabbitmq":
        exchange, sep, routing_key = to.partition("/")
        if not sep:
            return (
                f"{to!r}: on a RabbitMQ broker write exchange/routing key"
                f" ('/{to}' sends to queue {to!r} through the default exchange)"
            )
        if not _EXCHANGE.match(exchange):
            return f"{exchange!r} is not an exchange name (letters, digits, '_', '.', ':', '-')"
        if len(routing_key.encode()) > 255:
            return "the routing key is over 255 bytes (AMQP's limit)"
    return None
