"""Binding a listening socket before anything starts, so that a port in use is one
sentence for the user instead of a server's log line and a bare exit. Used by the API
and by the ``--metrics-port`` endpoint; kept apart from the API so that a worker binding
its metrics port imports no web framework."""

from __future__ import annotations

import errno
import socket

from cronwheel.errors import CronwheelError


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
