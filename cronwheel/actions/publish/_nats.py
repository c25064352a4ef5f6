"""NATS JetStream: a publish is confirmed by the stream's PubAck; ``Nats-Msg-Id`` is the
run's idempotency key, so the stream drops a repeat within its duplicate window."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import nats.errors
import nats.js.errors

from cronwheel.actions.publish.base import BrokerFailure, Message
from cronwheel.core.model import JSON

RECONNECT_WAIT = 0.25
"""Seconds between two tries to reach the server again (the run's retry does the rest)."""


async def _quiet(_: Exception) -> None:
    """nats-py prints every failed connection try with its traceback; the attempt's
    outcome says it once, in words a tenant may read."""


class NatsBroker:
    kind = "nats"

    def __init__(self, url: str) -> None:
        self._url = url
        self._nc: Any = None
        self._lock = asyncio.Lock()

    async def _jetstream(self, timeout: float) -> Any:
        async with self._lock:
            if self._nc is None or self._nc.is_closed:
                self._nc = None
                try:
                    # Two tries, then the connection is given up (closed): the next
                    # attempt opens a new one, so a server that was down is found again.
                    self._nc = await asyncio.wait_for(
                        nats.connect(
                            self._url,
                            connect_timeout=max(0.1, timeout / 2),
                            max_reconnect_attempts=1,
                            reconnect_time_wait=RECONNECT_WAIT,
                            error_cb=_quiet,
                        ),
                        timeout,
                    )
                except (TimeoutError, OSError, nats.errors.Error) as exc:
                    raise BrokerFailure("BrokerUnavailable", _why(exc)) from None
            return self._nc.jetstream()

    async def publish(self, message: Message, timeout: float) -> dict[str, JSON]:
        js = await self._jetstream(timeout)
        headers = {**message.headers, "Nats-Msg-Id": message.message_id}
        try:
            ack = await js.publish(message.to, message.body, timeout=timeout, headers=headers)
        except (nats.errors.NoRespondersError, nats.js.errors.NoStreamResponseError):
            raise BrokerFailure(
                "NoStream", f"no JetStream stream takes subject {message.to!r}"
            ) from None
        except nats.js.errors.APIError as exc:
            raise BrokerFailure(
                "Refused", f"JetStream refused the message: {exc.description}"
            ) from None
        except (TimeoutError, nats.errors.TimeoutError):
            raise BrokerFailure("Timeout", "JetStream did not acknowledge in time") from None
        except (OSError, nats.errors.Error) as exc:
            raise BrokerFailure("BrokerUnavailable", _why(exc)) from None
        return {"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)}

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            await self._nc.close()
        self._nc = None


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | nats.errors.TimeoutError):
        return "the NATS server did not answer in time"
    if isinstance(exc, nats.errors.AuthorizationError):
        return "the NATS server refused the credentials"
    return "cannot reach the NATS server (connection refused or lost)"


def open(url: str) -> NatsBroker:
    return NatsBroker(url)
