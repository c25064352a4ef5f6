"""The API as one more service of a process (``cronwheel dev``): uvicorn on the same
event loop, stopped by the process's own stop event rather than its own signal handling."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import Generator

import uvicorn

from cronwheel.api.app import create_app
from cronwheel.api.auth import AuthConfig
from cronwheel.errors import CronwheelError
from cronwheel.store.base import Store


class CannotListen(CronwheelError):
    """The API's address cannot be listened on: a port in use, a port that needs root,
    an address that is not this machine's."""


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for uvicorn to serve on. Binding here, before the
    store is opened and the services start, turns a port in use into one sentence
    instead of uvicorn's log line and a bare exit."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise CannotListen(f"cannot listen on {host!r}: {exc.strerror}; check --host") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise CannotListen(_why(exc, host, port)) from None
    sock.set_inheritable(True)
    return sock


def _why(exc: OSError, host: str, port: int) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use (another cronwheel dev or api?):"
            " stop that process, or choose another port with --port"
        )
    if exc.errno == errno.EACCES:
        return (
            f"not allowed to listen on port {port} (ports below 1024 need privileges):"
            " choose another port with --port"
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}: it is not an address of this machine; check --host"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # The process (cronwheel.runtime.serve) owns SIGTERM/SIGINT and stops every
        # service together; uvicorn must not take them over.
        yield


class ApiService:
    """Serve the API on ``host:port`` (or on ``sock``, see :func:`listen_socket`) until
    the stop event is set."""

    def __init__(
        self,
        store: Store,
        *,
        host: str,
        port: int,
        auth: AuthConfig,
        sock: socket.socket | None = None,
        access_log: bool = True,
        metrics_tenant_labels: bool = False,
    ) -> None:
        # log_config=None: uvicorn's loggers keep the process's handler and format
        # (cronwheel.logs), rather than uvicorn's own.
        app = create_app(store, auth=auth, metrics_tenant_labels=metrics_tenant_labels)
        config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=access_log)
        self.server = _QuietServer(config)
        self.sockets = None if sock is None else [sock]

    async def run(self, stop: asyncio.Event) -> None:
        serving = asyncio.ensure_future(self.server.serve(sockets=self.sockets))
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([serving, stopping], return_when=asyncio.FIRST_COMPLETED)
        self.server.should_exit = True
        stopping.cancel()
        await serving
