"""Publish actions: a run's message on a broker the worker's operator named
(``--broker events=nats://…``), confirmed by that broker, carrying the run's identity.

Each message carries what a webhook's request carries, as the broker's headers (NATS
headers, AMQP headers, a Redis stream entry's fields): ``Cronwheel-Tenant-Id``,
``-Job-Id``, ``-Run-Id``, ``-Attempt``, ``-Fence``, ``-Scheduled-For``,
``Idempotency-Key``, ``Content-Type`` and ``Cronwheel-Signature``, signed as webhooks are
(cronwheel.security.signing, with the tenant's key) over the message's body. The
idempotency key is also the broker's de-duplication id where it has one.

A confirmation is a success; anything else is a retryable failure (the run retries with
its backoff and ends dead-lettered like a webhook's), but for a ``to`` the broker's kind
cannot take, which no retry fixes. See docs/actions.md#publish.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
from collections.abc import Mapping
from typing import Any

from cronwheel.actions.context import RunContext
from cronwheel.actions.publish.base import (
    Broker,
    BrokerFailure,
    Message,
    MissingBrokerLibrary,
    check_installed,
)
from cronwheel.actions.webhook import content_type, identity_headers, request_body
from cronwheel.core.brokers import KINDS, kind_of_url, target_problem
from cronwheel.core.lifecycle import Outcome, OutcomeKind
from cronwheel.security import signing

log = logging.getLogger(__name__)

__all__ = [
    "Broker",
    "BrokerFailure",
    "Message",
    "MissingBrokerLibrary",
    "PublishAction",
    "check_installed",
    "message_headers",
    "open_broker",
]


def open_broker(url: str) -> Broker:
    """A client for the broker at ``url`` (not connected yet: it connects when it first
    publishes)."""
    kind = kind_of_url(url)
    module = importlib.import_module(f"cronwheel.actions.publish._{kind.name}")
    broker: Broker = module.open(url)
    return broker


def message_headers(ctx: RunContext, body: bytes, key: bytes, type_: str) -> dict[str, str]:
    """The run's identity and signature, as a webhook request's headers carry them."""
    return {"Content-Type": type_} | identity_headers(ctx, body, key)


class PublishAction:
    """Publishes runs to the brokers a worker names (``brokers``: name → URL), each
    tenant's messages signed with its key derived from the operator's ``secret``. One
    client per broker, opened with its first message and shared by every run."""

    def __init__(self, brokers: Mapping[str, str], secret: bytes) -> None:
        self.urls = dict(brokers)
        self.kinds = {name: kind_of_url(url).name for name, url in self.urls.items()}
        self.secret = secret
        self._clients: dict[str, Broker] = {}
        self._keys: dict[str, bytes] = {}

    def client(self, name: str) -> Broker:
        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = open_broker(self.urls[name])
        return client

    def key_of(self, tenant_id: str) -> bytes:
        key = self._keys.get(tenant_id)
        if key is None:
            key = self._keys[tenant_id] = signing.tenant_key(self.secret, tenant_id)
        return key

    async def execute(self, action: Mapping[str, Any], ctx: RunContext, timeout: float) -> Outcome:
        name, to = str(action.get("broker")), str(action.get("to"))
        kind = self.kinds.get(name)
        if kind is None:
            named = ", ".join(sorted(self.kinds)) or "none"
            return Outcome(
                OutcomeKind.FAILED,
                "UnknownBroker",
                f"this worker names no broker {name!r} (it names: {named}); start the"
                f" pool's workers with --broker {name}=URL",
            )
        problem = target_problem(kind, to)
        if problem is not None:
            return Outcome(OutcomeKind.PERMANENT, "InvalidTarget", f"to: {problem}")
        body = request_body(action, ctx)
        headers = message_headers(ctx, body, self.key_of(ctx.tenant_id), content_type(action))
        if ctx.trace:  # the attempt's span, which the consumer's own trace continues
            headers = {**ctx.trace, **headers}
        message = Message(to, body, headers, ctx.idempotency_key)
        try:
            receipt = await self.client(name).publish(message, timeout)
        except BrokerFailure as exc:
            kind_of = OutcomeKind.PERMANENT if exc.permanent else OutcomeKind.FAILED
            return Outcome(kind_of, exc.error_class, f"{KINDS[kind].name} broker {name!r}: {exc}")
        except Exception as exc:  # a client library's surprise: retried, told by class only
            log.debug("publish to broker %r failed unexpectedly", name, exc_info=True)
            # (its text may quote the broker's URL, password included).
            return Outcome(
                OutcomeKind.FAILED,
                exc.__class__.__name__,
                f"{KINDS[kind].name} broker {name!r}: the publish failed unexpectedly"
                f" ({exc.__class__.__name__}); the worker's log has no more either",
            )
        return Outcome(OutcomeKind.SUCCEEDED, result=json.dumps({"broker": name, **receipt}))

    async def close(self) -> None:
        for client in self._clients.values():
            with contextlib.suppress(Exception):  # a connection lost: nothing left to close
                await client.close()
        self._clients.clear()
