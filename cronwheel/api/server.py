"""The API as one more service of a process (``cronwheel dev``): uvicorn on the same
event loop, stopped by the process's own stop event rather than its own signal handling."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator

import uvicorn

from cronwheel.api.app import create_app
from cronwheel.observability.logs import hide_query_values
from cronwheel.security.egress import EgressPolicy
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from cronwheel.web.auth import AuthConfig


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # The process (cronwheel.engine.runtime.serve) owns SIGTERM/SIGINT and stops every
        # service together; uvicorn must not take them over.
        yield


class ApiService:
    """Serve the API on ``host:port`` (or on ``sock``, see
    :func:`cronwheel.web.sockets.listen_socket`) until the stop event is set."""

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
        egress: EgressPolicy | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        # log_config=None: uvicorn's loggers keep the process's handler and format
        # (cronwheel.observability.logs), rather than uvicorn's own.
        app = create_app(
            store,
            auth=auth,
            metrics_tenant_labels=metrics_tenant_labels,
            egress=egress,
            sealer=sealer,
        )
        hide_query_values()  # no query string's token in an access line
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
