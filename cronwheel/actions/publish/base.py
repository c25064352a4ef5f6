"""The seam every broker client fits: one :class:`Message` in, one receipt out, or a
:class:`BrokerFailure` saying whether a retry can help.

A client module (``_nats.py``, ``_rabbitmq.py``, ``_redis.py``) defines ``open(url)``
returning a :class:`Broker`; :func:`cronwheel.actions.publish.open_broker` picks the module
by the URL's kind (cronwheel.core.brokers). Kafka fits the same seam: a ``_kafka.py`` whose
publish waits for the partition leader's acknowledgement (``acks=all``) and sets the
idempotent producer on (docs/actions.md#adding-a-broker).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from cronwheel.core.brokers import kind_of_url
from cronwheel.core.model import JSON


class MissingBrokerLibrary(ValueError):
    """A broker URL whose kind's client library is not installed."""


def check_installed(brokers: Mapping[str, str]) -> None:
    """Raise :class:`MissingBrokerLibrary` naming the extra to install for the first
    broker whose client library is missing (and ValueError for a URL of no kind). Cheap:
    it imports nothing (a worker checks its brokers before it starts)."""
    for name, url in brokers.items():
        kind = kind_of_url(url)
        if importlib.util.find_spec(kind.library) is None:
            raise MissingBrokerLibrary(
                f"{name}: a {kind.name} broker needs its client library, which is not"
                f" installed: pip install 'cronwheel[{kind.extra}]'"
            )


@dataclass(frozen=True, slots=True)
class Message:
    """What one attempt publishes. ``headers`` carry the run's identity and signature;
    ``message_id`` is the run's idempotency key, which a broker that de-duplicates
    (JetStream's ``Nats-Msg-Id``) uses to drop a repeat."""

    to: str
    body: bytes
    headers: dict[str, str]
    message_id: str


class BrokerFailure(Exception):
    """A publish the broker did not confirm. ``error_class`` names what happened
    (``BrokerUnavailable``, ``Unroutable``…); the text is shown to the tenant, so it never
    carries the broker's URL, password or the operating system's words about a socket."""

    def __init__(self, error_class: str, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        self.error_class = error_class
        self.permanent = permanent


class Broker(Protocol):
    """One connection (or pool) to one broker, shared by every run of a worker."""

    kind: str

    async def publish(self, message: Message, timeout: float) -> dict[str, JSON]:
        """Publish and wait for the broker's confirmation, at most ``timeout`` seconds;
        return what the broker confirmed (stream and sequence, message id…), recorded as
        the run's result. Raise :class:`BrokerFailure` when it did not confirm."""
        ...

    async def close(self) -> None:
        """Close the connection; a later publish opens a new one."""
        ...
