"""RabbitMQ: a publish is confirmed by a publisher confirm (``basic.ack``), sent
``mandatory``: a message no queue takes comes back and fails the attempt. RabbitMQ keeps
no de-duplication of its own: the idempotency key is the ``message_id`` property, and
the consumer drops a repeat by it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aio_pika
import aio_pika.exceptions as amqp
import aiormq.exceptions

from cronwheel.actions.publish.base import BrokerFailure, Message
from cronwheel.core.model import JSON


class RabbitBroker:
    kind = "rabbitmq"

    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: Any = None
        self._channel: Any = None
        self._lock = asyncio.Lock()

    async def _open_channel(self, timeout: float) -> Any:
        async with self._lock:
            # A connection the broker dropped may still say it is open (aio-pika learns
            # of it when a channel is asked for): then it is opened afresh, once.
            for fresh in (False, True):
                if fresh or self._connection is None or self._connection.is_closed:
                    await self.close()
                    self._connection = await self._connect(timeout)
                if self._channel is None or self._channel.is_closed:
                    try:
                        self._channel = await asyncio.wait_for(
                            self._connection.channel(
                                publisher_confirms=True, on_return_raises=True
                            ),
                            timeout,
                        )
                    except (RuntimeError, TimeoutError, OSError, amqp.AMQPError):
                        self._channel = None
                        if fresh:
                            await self.close()
                            raise BrokerFailure("BrokerUnavailable", _UNREACHABLE) from None
                        continue
                return self._channel
            raise AssertionError("unreachable")

    async def _connect(self, timeout: float) -> Any:
        try:
            return await asyncio.wait_for(aio_pika.connect(self._url, timeout=timeout), timeout)
        except amqp.ProbableAuthenticationError:
            raise BrokerFailure("BrokerUnavailable", "RabbitMQ refused the credentials") from None
        except (TimeoutError, OSError, amqp.AMQPError):
            raise BrokerFailure("BrokerUnavailable", _UNREACHABLE) from None

    async def publish(self, message: Message, timeout: float) -> dict[str, JSON]:
        exchange_name, _, routing_key = message.to.partition("/")
        channel = await self._open_channel(timeout)
        amqp_message = aio_pika.Message(
            message.body,
            headers=dict(message.headers),
            content_type=message.headers.get("Content-Type"),
            message_id=message.message_id,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        try:
            exchange = (
                channel.default_exchange
                if not exchange_name
                else await channel.get_exchange(exchange_name, ensure=False)
            )
            await exchange.publish(amqp_message, routing_key, mandatory=True, timeout=timeout)
        except amqp.DeliveryError as exc:
            if exc.frame is not None and exc.frame.name == "Basic.Return":
                raise BrokerFailure(
                    "Unroutable",
                    f"no queue is bound to {message.to!r} (the message came back unroutable)",
                ) from None
            raise BrokerFailure("Nacked", "RabbitMQ did not confirm the message") from None
        except aiormq.exceptions.ChannelNotFoundEntity:
            raise BrokerFailure("NotFound", f"RabbitMQ has no exchange {exchange_name!r}") from None
        except TimeoutError:
            await self.close()  # a confirm may still come on this channel: start afresh
            raise BrokerFailure("Timeout", "RabbitMQ did not confirm in time") from None
        except (OSError, RuntimeError, amqp.AMQPError, amqp.ChannelInvalidStateError):
            await self.close()
            raise BrokerFailure("BrokerUnavailable", _UNREACHABLE) from None
        return {"exchange": exchange_name, "routing_key": routing_key, "confirmed": True}

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and not connection.is_closed:
            with contextlib.suppress(Exception):  # a connection the broker dropped
                await connection.close()


_UNREACHABLE = "cannot reach RabbitMQ (connection refused or lost)"


def open(url: str) -> RabbitBroker:
    return RabbitBroker(url)
