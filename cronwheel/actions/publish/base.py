"""The seam every broker client fits: one :class:`Message` in, one receipt out, or a
:class:`BrokerFailure` saying whether a retry can help.

A client module (``_nats.py``, ``_rabbitmq.py``, ``_redis.py``) defines ``open(url)``
returning a :class:`Broker`; :func:`cronwheel.actions.publish.open_broker` picks the module
by the URL's kind (cronwheel.core.brokers). Kafka fits the same seam: a ``_kafka.py`` whose
publish waits for the partition leader's acknowledgement (``acks=all``) and sets the
idempotent producer on (docs/actions.md#adding-a-broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cronwheel.core.model import JSON


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
