"""The API as one more service of a process (``cronwheel dev``): uvicorn on the same
event loop, stopped by the process's own stop event rather than its own signal handling."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator

import uvicorn

from cronwheel.api.app import create_app
from cronwheel.api.auth import AuthConfig
from cronwheel.store.base import Store


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        # The process (cronwheel.runtime.serve) owns SIGTERM/SIGINT and stops every
        # service together; uvicorn must not take them over.
        yield


class ApiService:
    """Serve the API on ``host:port`` until the stop event is set."""

    def __init__(self, store: Store, *, host: str, port: int, auth: AuthConfig) -> None:
        config = uvicorn.Config(create_app(store, auth=auth), host=host, port=port, log_config=None)
        self.server = _QuietServer(config)

    async def run(self, stop: asyncio.Event) -> None:
        serving = asyncio.ensure_future(self.server.serve())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait([serving, stopping], return_when=asyncio.FIRST_COMPLETED)
        self.server.should_exit = True
        stopping.cancel()
        await serving
