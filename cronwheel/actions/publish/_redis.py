"""Redis Streams: a publish is an ``XADD``, confirmed by the entry id Redis answers.

Redis (before 8.6's ``IDMP``) keeps no de-duplication of its own, so cronwheel adds it:
one script, atomic in Redis, appends the entry only if no entry of the same idempotency
key was appended to that stream within :data:`DEDUP_SECONDS`, and otherwise answers the
first entry's id. A retry after a lost answer therefore adds nothing; past the window
(a replay days later) it appends again, and the consumer still has the
``Idempotency-Key`` field to drop it by."""

from __future__ import annotations

import asyncio
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions

from cronwheel.actions.publish.base import BrokerFailure, Message
from cronwheel.core.model import JSON

DEDUP_SECONDS = 86_400
"""How long a stream remembers an idempotency key it took (one marker key each)."""

_XADD_ONCE = """
local first = redis.call('GET', KEYS[2])
if first then return {first, 1} end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('SET', KEYS[2], id, 'EX', ARGV[1])
return {id, 0}
"""


def marker_key(stream: str, idempotency_key: str) -> str:
    """Where a stream's taken idempotency key is remembered; the stream's name in braces
    puts it in the stream's own slot on a Redis Cluster (a script's keys must share one)."""
    return f"cronwheel:published:{{{stream}}}:{idempotency_key}"


class RedisBroker:
    kind = "redis"

    def __init__(self, url: str) -> None:
        self._client: Any = aioredis.from_url(url, socket_connect_timeout=5)
        self._script: Any = self._client.register_script(_XADD_ONCE)

    async def publish(self, message: Message, timeout: float) -> dict[str, JSON]:
        fields: list[str | bytes] = [
            "body",
            message.body,
            *(part for pair in message.headers.items() for part in pair),
        ]
        try:
            entry, duplicate = await asyncio.wait_for(
                self._script(
                    keys=[message.to, marker_key(message.to, message.message_id)],
                    args=[DEDUP_SECONDS, *fields],
                ),
                timeout,
            )
        except TimeoutError:
            raise BrokerFailure("Timeout", "Redis did not answer in time") from None
        except redis.exceptions.AuthenticationError:
            raise BrokerFailure("BrokerUnavailable", "Redis refused the credentials") from None
        except (OSError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            raise BrokerFailure(
                "BrokerUnavailable", "cannot reach Redis (connection refused or lost)"
            ) from None
        except redis.exceptions.ResponseError as exc:
            # WRONGTYPE (the key is not a stream), OOM, READONLY: Redis's own words name
            # no address.
            raise BrokerFailure("Refused", f"Redis refused the entry: {exc}") from None
        return {"stream": message.to, "id": _text(entry), "duplicate": bool(duplicate)}

    async def close(self) -> None:
        await self._client.aclose()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def open(url: str) -> RedisBroker:
    return RedisBroker(url)
