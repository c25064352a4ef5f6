"""The ``--metrics-*`` options of the long-running commands (docs/observability.md)."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from cronwheel.cli._logs import hint
from cronwheel.observability import metrics
from cronwheel.web.sockets import CannotListen

F = TypeVar("F", bound=Callable[..., Any])


def metrics_port_options(fn: F) -> F:
    """``--metrics-port`` (off by default) and ``--metrics-host`` (loopback by default)."""
    fn = click.option(
        "--metrics-host",
        envvar="CRONWHEEL_METRICS_HOST",
        default="127.0.0.1",
        show_default=True,
        help="Where --metrics-port listens.",
    )(fn)
    return click.option(
        "--metrics-port",
        envvar="CRONWHEEL_METRICS_PORT",
        type=click.IntRange(0, 65535),
        default=None,
        help="Serve Prometheus metrics at http://HOST:PORT/metrics (off unless given).",
    )(fn)


tenant_labels_option = click.option(
    "--metrics-tenant-labels",
    is_flag=True,
    envvar="CRONWHEEL_METRICS_TENANT_LABELS",
    help="/metrics counts dead runs per tenant (a label per tenant) instead of in total.",
)


@contextlib.contextmanager
def metrics_endpoint(port: int | None, host: str) -> Iterator[None]:
    """This process's metrics served on ``host:port`` while in the block (nothing if
    ``port`` is None); the address is said on stderr (as a log record under
    ``--log-format json``)."""
    with contextlib.ExitStack() as stack:
        try:
            bound = stack.enter_context(metrics.serving(port, host))
        except OSError as exc:
            raise CannotListen(f"metrics: {_why(exc, host, port)}") from None
        if bound is not None:
            # A JSON line under --log-format json: every line on stderr parses.
            hint(f"metrics on http://{host}:{bound}/metrics")
        yield


def _why(exc: OSError, host: str, port: int | None) -> str:
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use: choose another --metrics-port"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; check --metrics-host"
