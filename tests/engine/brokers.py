"""The machine's real brokers for the publish tests: a consumer of each, on a stream,
queue or subject of the test's own (made unique, deleted after), and a TCP proxy in
front of a broker that a test stops and starts to take the broker "down" without
touching the shared server other tests use."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

NATS_URL = os.environ.get("CRONWHEEL_TEST_NATS_URL", "nats://127.0.0.1:4222")
RABBITMQ_URL = os.environ.get("CRONWHEEL_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
REDIS_URL = os.environ.get("CRONWHEEL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
URLS = {"nats": NATS_URL, "rabbitmq": RABBITMQ_URL, "redis": REDIS_URL}
KINDS = tuple(URLS)
REQUIRED = os.environ.get("CI", "").lower() == "true"
"""In CI the brokers must be there (.ci/run starts them): one missing fails the tests."""


def _port_of(url: str) -> tuple[str, int]:
    host_port = url.split("://", 1)[1].split("/", 1)[0].rsplit("@", 1)[-1]
    host, _, port = host_port.rpartition(":")
    return host, int(port)


def require(kind: str) -> None:
    """Skip (fail in CI) when the broker of ``kind`` does not listen."""
    host, port = _port_of(URLS[kind])
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError:
        reason = f"no {kind} broker listens at {host}:{port} (.ci/run starts one)"
        if REQUIRED:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)


def via(url: str, port: int) -> str:
    """``url`` with its port replaced: the broker reached through a proxy."""
    host, real = _port_of(url)
    return url.replace(f"{host}:{real}", f"{host}:{port}", 1)


@dataclass
class Received:
    """One message a consumer took: its body and its headers (or fields), as text."""

    body: bytes
    headers: dict[str, str]


@dataclass
class Destination:
    """Where a test publishes (``to``) and how it reads what arrived."""

    kind: str
    to: str
    _read: Any = field(repr=False)

    async def received(self) -> list[Received]:
        """Every message published so far (each is confirmed, so it is there)."""
        got: list[Received] = await self._read()
        return got


@contextlib.asynccontextmanager
async def destination(kind: str) -> AsyncIterator[Destination]:
    """A fresh stream / queue / subject on the real broker of ``kind``, deleted after."""
    require(kind)
    unique = f"cwtest{uuid.uuid4().hex[:12]}"
    if kind == "nats":
        async with _nats(unique) as found:
            yield found
    elif kind == "rabbitmq":
        async with _rabbitmq(unique) as found:
            yield found
    else:
        async with _redis(unique) as found:
            yield found


@contextlib.asynccontextmanager
async def _nats(unique: str) -> AsyncIterator[Destination]:
    import nats

    nc = await nats.connect(NATS_URL)
    js = nc.jetstream()
    subject = f"{unique}.events"
    await js.add_stream(name=unique, subjects=[f"{unique}.>"])
    psub = await js.pull_subscribe(subject, durable=None, stream=unique)

    async def read() -> list[Received]:
        info = await js.stream_info(unique)
        want = info.state.messages
        got: list[Received] = []
        while len(got) < want:
            for msg in await psub.fetch(want - len(got), timeout=10):
                await msg.ack()
                got.append(Received(msg.data, dict(msg.headers or {})))
        return got

    try:
        yield Destination("nats", subject, read)
    finally:
        await js.delete_stream(unique)
        await nc.close()


@contextlib.asynccontextmanager
async def _rabbitmq(unique: str) -> AsyncIterator[Destination]:
    import aio_pika

    connection = await aio_pika.connect(RABBITMQ_URL)
    channel = await connection.channel()
    queue = await channel.declare_queue(unique, durable=False)

    async def read() -> list[Received]:
        got: list[Received] = []
        while (msg := await queue.get(no_ack=True, fail=False, timeout=10)) is not None:
            headers = {str(k): str(v) for k, v in (msg.headers or {}).items()}
            headers["message_id"] = str(msg.message_id)
            got.append(Received(msg.body, headers))
        return got

    try:
        yield Destination("rabbitmq", f"/{unique}", read)
    finally:
        await queue.delete(if_unused=False, if_empty=False)
        await connection.close()


@contextlib.asynccontextmanager
async def _redis(unique: str) -> AsyncIterator[Destination]:
    import redis.asyncio as aioredis

    client = aioredis.from_url(REDIS_URL)

    async def read() -> list[Received]:
        got = []
        for _, fields in await client.xrange(unique):
            text = {k.decode(): v for k, v in fields.items()}
            body = text.pop("body")
            got.append(Received(body, {k: v.decode() for k, v in text.items()}))
        return got

    try:
        yield Destination("redis", unique, read)
    finally:
        markers = [k async for k in client.scan_iter(f"cronwheel:published:{{{unique}}}:*")]
        await client.delete(unique, *markers)
        await client.aclose()


class TcpProxy:
    """Forwards a local port to a broker; :meth:`stop` refuses new connections and cuts
    the open ones (the broker is "down" to whoever uses the port), :meth:`start` serves
    again on the same port."""

    def __init__(self, url: str) -> None:
        self.target = _port_of(url)
        with socket.socket() as probe:  # a free port, kept for every start
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, reuse_address=True
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()
            self._open.clear()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, up_writer}
        await asyncio.gather(
            _pump(reader, up_writer), _pump(up_reader, writer), return_exceptions=True
        )
        self._open -= {writer, up_writer}


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.transport.abort()
