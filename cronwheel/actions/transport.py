"""The connections of webhooks, through the egress policy (:mod:`cronwheel.actions.egress`).

Kept apart from the policy so that deciding what is allowed (at job creation, in the API)
imports no HTTP stack, and a worker imports it with its first webhook."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

import httpcore

from cronwheel.actions.egress import (
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
            return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        addresses = await self._resolve(host, port, timeout)
        # Refused if any address is: a name with one public and one internal address
        # could otherwise be steered to the internal one.
        if not addresses or not all(self.policy.address_allowed(ip) for ip in addresses):
            raise EgressRefused(REFUSED)
        error: Exception | None = None
        for ip in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(ip), port, timeout, local_address, socket_options
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


def checked_transport(policy: EgressPolicy, **limits: Any) -> Any:
    """An httpx transport whose connections pass the policy (see CheckedBackend).

    httpx does not take a network backend as an argument, so the transport's connection
    pool is replaced by one built the same way with ours; the worker's tests of names
    resolving to loopback fail if this ever stops being the pool httpx uses."""
    import httpx

    transport = httpx.AsyncHTTPTransport(**limits)
    pool_limits: httpx.Limits = limits.get("limits", httpx.Limits())
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=pool_limits.max_connections,
        max_keepalive_connections=pool_limits.max_keepalive_connections,
        keepalive_expiry=pool_limits.keepalive_expiry,
        http1=True,
        http2=False,
        network_backend=CheckedBackend(policy),
    )
    return transport
