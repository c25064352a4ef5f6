"""The connections of webhooks, through the egress policy (:mod:`cronwheel.security.egress`).

Kept apart from the policy so that deciding what is allowed (at job creation, in the API)
imports no HTTP stack, and a worker imports it with its first webhook."""

from __future__ import annotations

import asyncio
import ipaddress
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

from cronwheel.security.egress import (
    REFUSED,
    EgressPolicy,
    EgressRefused,
    IPAddress,
    literal_address,
)


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the policy between resolution and connection:
    the host is resolved here, every address is checked, and the socket connects to a
    checked address. TLS is started by httpcore afterwards with the URL's own host name
    (SNI and certificate checks are unchanged), and the Host header is the URL's."""

    def __init__(
        self, policy: EgressPolicy, inner: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.policy.host_allowed(host):
            return _Stream(
                await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
            )
        addresses = await self._resolve(host, port, timeout)
        # Refused if any address is: a name with one public and one internal address
        # could otherwise be steered to the internal one.
        if not addresses or not all(self.policy.address_allowed(ip) for ip in addresses):
            raise EgressRefused(REFUSED)
        error: Exception | None = None
        for ip in addresses:
            try:
                return _Stream(
                    await self.inner.connect_tcp(
                        str(ip), port, timeout, local_address, socket_options
                    )
                )
            except httpcore.ConnectError as exc:
                error = exc
        assert error is not None
        raise error

    async def _resolve(self, host: str, port: int, timeout: float | None) -> list[IPAddress]:
        literal = literal_address(host)
        if literal is not None:
            return [literal]
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout
            )
        except TimeoutError:
            raise httpcore.ConnectTimeout("name resolution timed out") from None
        except OSError:
            raise httpcore.ConnectError("the host name did not resolve") from None
        found: list[IPAddress] = []
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if ip not in found:
                found.append(ip)
        return found

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise EgressRefused(REFUSED)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _Stream(httpcore.AsyncNetworkStream):
    """A connection whose "is it readable" answer is cheap. httpcore asks it of every idle
    connection of a pool at every request's start and end (has the server closed it?),
    and anyio answers by building a dict of every attribute of the socket, a peer-name
    system call included: a fifth of a busy webhook worker's CPU. The socket is looked
    up once here; everything else goes to anyio's stream."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self.inner = inner
        self._socket = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self.inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self.inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        # The TLS stream reads the same socket: its readability is the socket's.
        tls = await self.inner.start_tls(ssl_context, server_hostname, timeout)
        stream = _Stream(tls)
        stream._socket = self._socket
        return stream

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return _readable(self._socket)
        if info == "socket":
            return self._socket
        return self.inner.get_extra_info(info)


def _readable(sock: socket.socket | None) -> bool:
    """Whether a read would not block: data, or the peer's close, is waiting (a socket
    that is gone counts as readable: its next read ends)."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


def checked_transport(
    policy: EgressPolicy, ssl_context: ssl.SSLContext | None = None, **limits: Any
) -> Any:
    """An httpx transport whose connections pass the policy (see CheckedBackend).
    ``ssl_context``: shared by the caller's transports (making one costs milliseconds).

    httpx does not take a network backend as an argument, so the transport's connection
    pool is replaced by one built the same way with ours; the worker's tests of names
    resolving to loopback fail if this ever stops being the pool httpx uses."""
    import httpx

    context = ssl_context or httpx.create_ssl_context()
    transport = httpx.AsyncHTTPTransport(verify=context, **limits)
    pool_limits: httpx.Limits = limits.get("limits", httpx.Limits())
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=context,
        max_connections=pool_limits.max_connections,
        max_keepalive_connections=pool_limits.max_keepalive_connections,
        keepalive_expiry=pool_limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=CheckedBackend(policy),
    )
    return transport
