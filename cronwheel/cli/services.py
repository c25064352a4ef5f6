"""``cronwheel dev``, ``cronwheel worker`` and ``cronwheel scheduler``: the long-running shapes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import click

from cronwheel.actions.handler import HandlerRegistry
from cronwheel.api.auth import AuthConfig
from cronwheel.api.server import ApiService, listen_socket
from cronwheel.attempt_log import ATTEMPTS_LOGGER
from cronwheel.cli._common import db_option, run_async, secret, start_tracing
from cronwheel.cli._logs import access_log_option, log_options
from cronwheel.cli._metrics import metrics_endpoint, metrics_port_options, tenant_labels_option
from cronwheel.cli.api import is_loopback
from cronwheel.console import Output, watch_runs
from cronwheel.demo import create_demo_jobs, demo_handlers, echo_server
from cronwheel.maintenance import Maintenance, MaintenanceResult
from cronwheel.redact import mask_url, register_secret
from cronwheel.runtime import Service, load_handlers, serve, tune_process
from cronwheel.scheduler import Scheduler
from cronwheel.service import JobService
from cronwheel.shards import ShardingConfig
from cronwheel.store import open_store
from cronwheel.store.base import Store
from cronwheel.store.sqlite import SqliteStore
from cronwheel.store.sqlite.owner import FileInUse, OwnerLock, take_owner_lock
from cronwheel.worker import Worker, WorkerConfig

DEV_DB = "sqlite:///cronwheel.db"

log = logging.getLogger("cronwheel.cli")


def _pools(values: tuple[str, ...], registry: HandlerRegistry, concurrency: int) -> dict[str, int]:
    """``--pool reports`` or ``--pool reports=4``; none given: the handlers' pools."""
    pools: dict[str, int] = {}
    for value in values:
        name, _, n = value.partition("=")
        if not name or (n and not n.isdigit()) or (n and int(n) < 1):
            raise click.BadParameter(
                f"{value!r}: expected NAME or NAME=CONCURRENCY", param_hint="--pool"
            )
        pools[name] = int(n) if n else concurrency
    return pools or dict.fromkeys(registry.pools or {"default"}, concurrency)


def _registry(app: str | None) -> HandlerRegistry:
    if app is None:
        return HandlerRegistry()
    try:
        return load_handlers(app)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--app") from exc


@contextlib.asynccontextmanager
async def _store(url: str) -> AsyncIterator[Store]:
    store = await open_store(url)
    try:
        await store.migrate()
        yield store
    finally:
        await store.close()


def _own_file(store: Store) -> OwnerLock | None:
    """Take the SQLite file's owner lock for ``cronwheel dev``; a second dev on the same
    file is refused (exit 4, a conflict) rather than silently sharing it."""
    if not isinstance(store, SqliteStore) or store.path == ":memory:":
        return None
    try:
        return take_owner_lock(store.path)
    except FileInUse as exc:
        raise _FileInUseError(str(exc)) from None


class _FileInUseError(click.ClickException):
    exit_code = 4  # the README's "conflict"


def _recovered(rescued: MaintenanceResult, pid: int | None) -> str:
    """What the start recovered of the runs its dead predecessor held."""
    n = len(rescued.retried) + len(rescued.dead) + len(rescued.cancelled)
    who = f"the previous cronwheel dev (pid {pid})" if pid else "the previous cronwheel dev"
    parts = [
        f"{len(ids)} {what}"
        for ids, what in (
            (rescued.retried, "claimable again"),
            (rescued.dead, "dead"),
            (rescued.cancelled, "cancelled"),
        )
        if ids
    ]
    runs = "run" if n == 1 else "runs"
    return f"recovered {n} {runs} {who} held when it died: {', '.join(parts)}"


def _webhook_secret() -> None:
    """The worker signs with CRONWHEEL_WEBHOOK_SECRET: never shown by this process."""
    register_secret(os.environ.get("CRONWHEEL_WEBHOOK_SECRET"))


def _stop_after(seconds: float | None, stop: asyncio.Event) -> None:
    if seconds is not None:
        asyncio.get_running_loop().call_later(seconds, stop.set)


app_option = click.option(
    "--app", default=None, help="Your handlers, as module:attribute (a Worker)."
)
pool_option = click.option(
    "--pool", "pools", multiple=True, help="A pool to serve: NAME or NAME=CONCURRENCY (repeatable)."
)
concurrency_option = click.option(
    "--concurrency", default=10, show_default=True, help="Runs at once per pool."
)
duration_option = click.option(
    "--duration", type=float, default=None, help="Stop after this many seconds."
)


@click.command()
@log_options("info")
@db_option
@app_option
@pool_option
@concurrency_option
@click.option(
    "--lease", "lease_seconds", default=30.0, show_default=True, help="Lease TTL in seconds."
)
@click.option(
    "--grace",
    "grace_seconds",
    default=30.0,
    show_default=True,
    help="On SIGTERM, how long running runs may finish before they are released.",
)
@duration_option
@metrics_port_options
def worker(
    db_url: str,
    app: str | None,
    pools: tuple[str, ...],
    concurrency: int,
    lease_seconds: float,
    grace_seconds: float,
    duration: float | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Execute runs of some pools: your handlers (--app) and any webhook jobs."""
    registry = _registry(app)
    config = WorkerConfig(
        pools=_pools(pools, registry, concurrency),
        lease_seconds=lease_seconds,
        heartbeat_seconds=min(5.0, lease_seconds / 3),
        grace_seconds=grace_seconds,
    )

    _webhook_secret()
    start_tracing()

    async def main() -> None:
        async with _store(db_url) as store:
            stop = asyncio.Event()
            _stop_after(duration, stop)
            w = Worker(store, config, handlers=registry)
            shown = mask_url(db_url)
            log.info("worker %s serving %s on %s", w.id, dict(config.pools), shown)
            tune_process()
            with metrics_endpoint(metrics_port, metrics_host):
                await serve([w, Maintenance(store)], stop=stop)

    run_async(main)


@click.command()
@log_options("info")
@db_option
@click.option(
    "--shards",
    "shard_count",
    envvar="CRONWHEEL_SHARDS",
    default=64,
    show_default=True,
    help="How many shards the job space is split into (the same on every scheduler).",
)
@click.option(
    "--shard-lease",
    "shard_lease",
    envvar="CRONWHEEL_SHARD_LEASE",
    default=10.0,
    show_default=True,
    help="Shard lease TTL in seconds: a dead scheduler's shards move within about this.",
)
@duration_option
@metrics_port_options
def scheduler(
    db_url: str,
    shard_count: int,
    shard_lease: float,
    duration: float | None,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Materialise the runs of due jobs; run several: they share the shards."""
    try:
        sharding = ShardingConfig(shard_count, shard_lease, min(2.0, shard_lease / 3))
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc

    async def main() -> None:
        async with _store(db_url) as store:
            stop = asyncio.Event()
            _stop_after(duration, stop)
            service = Scheduler(store, sharding=sharding)
            holder = service.owner.holder if service.owner else "?"
            log.info("scheduler %s on %s, %d shards", holder, mask_url(db_url), shard_count)
            tune_process()
            with metrics_endpoint(metrics_port, metrics_host):
                await serve([service, Maintenance(store)], stop=stop)

    run_async(main)


@click.command()
@log_options("warning", quiet_by_default=(ATTEMPTS_LOGGER,))
@db_option
@app_option
@pool_option
@concurrency_option
@click.option("--demo", is_flag=True, help="Create example jobs and watch them fire.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Where the API listens.")
@click.option(
    "--port",
    default=8080,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Where the API listens (0: a free port, shown at start).",
)
@click.option(
    "--admin-token",
    envvar="CRONWHEEL_ADMIN_TOKEN",
    default=None,
    callback=secret,
    help="Required when --host is not a loopback address.",
)
@access_log_option(False)
@duration_option
@tenant_labels_option
def dev(
    db_url: str,
    app: str | None,
    pools: tuple[str, ...],
    concurrency: int,
    demo: bool,
    host: str,
    port: int,
    admin_token: str | None,
    access_log: bool,
    duration: float | None,
    metrics_tenant_labels: bool,
) -> None:
    """Everything in one process on one store file: API, scheduler, worker, maintenance."""
    if not is_loopback(host) and admin_token is None:
        raise click.UsageError(
            f"--host {host} is reachable from other machines: give --admin-token"
        )
    auth = AuthConfig(admin_token=admin_token, disabled=admin_token is None)
    registry = demo_handlers() if demo else _registry(app)
    if demo and app is not None:
        registry.include(_registry(app))
    config = WorkerConfig(pools=_pools(pools, registry, concurrency))
    _webhook_secret()
    start_tracing()

    async def main() -> None:
        sock = listen_socket(host, port)  # a port in use is said before anything starts
        bound = sock.getsockname()[1]
        async with _store(db_url) as store:
            owner = _own_file(store)
            try:
                await _dev(store, owner, sock, bound)
            finally:
                if owner is not None:
                    owner.release()

    async def _dev(store: Store, owner: OwnerLock | None, sock: socket.socket, bound: int) -> None:
        stop = asyncio.Event()
        _stop_after(duration, stop)
        worker = Worker(store, config, handlers=registry)
        maintenance = Maintenance(store)
        output = Output()
        output.line(
            f"cronwheel dev on {mask_url(db_url)} (pid {os.getpid()}), pools {dict(config.pools)}"
        )
        if owner is not None:
            # The lock was free: the dev before us is dead, and so are its workers.
            rescued = await maintenance.rescue_dead_owners(owner.previous)
            owner.record([worker.id])
            if rescued.retried or rescued.dead or rescued.cancelled:
                output.line(_recovered(rescued, owner.previous_pid))
        services: list[Service] = [
            ApiService(
                store,
                host=host,
                port=port,
                auth=auth,
                sock=sock,
                access_log=access_log,
                metrics_tenant_labels=metrics_tenant_labels,
            ),
            Scheduler(store),
            worker,
            maintenance,
        ]
        note = "no authentication: loopback only" if auth.disabled else "token required"
        output.line(f"API on http://{host}:{bound}/v1 ({note}); docs at /docs, metrics at /metrics")
        output.line(f"dashboard at http://{host}:{bound}/ui/")
        with echo_server() as echo_url:
            if demo:
                created = await create_demo_jobs(JobService(store, actor="demo"), echo_url)
                output.line(f"demo: {created} example jobs created; watch them fire")
            tune_process()

            def console(s: asyncio.Event) -> Coroutine[Any, Any, None]:
                return watch_runs(
                    store, s, output=output, own_pools=config.pools, own_worker=worker.id
                )

            await serve(services, stop=stop, extra=[console])
        output.line("stopped")

    run_async(main)
