"""The embedded shape without its terminal view: scheduler, worker and maintenance in one
process, as ``cronwheel dev`` runs them. ``cronwheel dev`` prints every run, which would
be part of what is measured; this runs the same services and prints nothing."""

from __future__ import annotations

import argparse
import socket

from cronwheel.cli.services import ASYNC_CONCURRENCY
from cronwheel.engine import eventloop
from cronwheel.engine.maintenance import Maintenance
from cronwheel.engine.notifier import Notifier
from cronwheel.engine.runtime import Service, serve, tune_process
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.store import open_store

from cw.app import worker as app


async def main(db: str, concurrency: int, api_port: int | None) -> None:
    store = await open_store(db)
    try:
        await store.migrate()
        config = WorkerConfig(pools={"default": concurrency})
        services: list[Service] = [
            Scheduler(store),
            Worker(store, config, handlers=app.handlers),
            Maintenance(store),
            Notifier(store),  # as `cronwheel dev` runs one
        ]
        if api_port is not None:
            # As `cronwheel dev` serves it: the embedded shape's clients enqueue through
            # the serving process, whose writes then wake its worker in-process.
            from cronwheel.api.server import ApiService
            from cronwheel.web.auth import AuthConfig

            sock = socket.create_server(("127.0.0.1", api_port))
            auth = AuthConfig(admin_token=None, disabled=True)
            api = ApiService(
                store, host="127.0.0.1", port=api_port, auth=auth, sock=sock, access_log=False
            )
            services.append(api)
        tune_process()  # as the CLI's service commands do
        await serve(services)
    finally:
        await store.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--db", required=True)
    # As `cronwheel dev` and `cronwheel worker` choose for a pool of async handlers.
    p.add_argument("--concurrency", type=int, default=ASYNC_CONCURRENCY)
    p.add_argument("--api-port", type=int, default=None, help="serve the API there too")
    a = p.parse_args()
    eventloop.run(main(a.db, a.concurrency, a.api_port))  # as the CLI's commands do
