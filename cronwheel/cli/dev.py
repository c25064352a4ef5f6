"""``cronwheel dev``: everything in one process on one store file (API, scheduler, worker,
maintenance), with a console of the runs as they happen."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Coroutine
from typing import Any

import click

from cronwheel.api.server import ApiService
from cronwheel.cli._common import (
    allow_command_option,
    command_grace_option,
    commands_line,
    db_option,
    run_async,
    secret,
    secrets_key_option,
    start_tracing,
    webhook_allow_option,
)
from cronwheel.cli._logs import access_log_option, log_options
from cronwheel.cli._metrics import tenant_labels_option
from cronwheel.cli.api import is_loopback
from cronwheel.cli.demo import create_demo_jobs, demo_handlers, echo_server
from cronwheel.cli.services import (
    app_option,
    broker_option,
    concurrency_option,
    describe_brokers,
    duration_option,
    pool_option,
    pools_of,
    registry_of,
    stop_after,
    store_of,
    webhook_connections_option,
    webhook_per_target_option,
    webhook_secret,
)
from cronwheel.console import Output, watch_runs
from cronwheel.control.service import JobService
from cronwheel.engine.maintenance import Maintenance, MaintenanceResult
from cronwheel.engine.notifier import Notifier
from cronwheel.engine.runtime import Service, exit_past_lingering_threads, serve, tune_process
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.observability.attempt_log import ATTEMPTS_LOGGER
from cronwheel.security.egress import LOOPBACK, EgressPolicy
from cronwheel.security.redact import mask_url
from cronwheel.security.sealing import Sealer, dev_sealer
from cronwheel.store.base import Store
from cronwheel.store.sqlite import SqliteStore
from cronwheel.store.sqlite.owner import FileInUse, OwnerLock, take_owner_lock
from cronwheel.web.auth import AuthConfig
from cronwheel.web.sockets import listen_socket


def _own_file(store: Store) -> OwnerLock | None:
    """Take the SQLite file's owner lock for ``cronwheel dev``; a second dev on the same
    file is refused (exit 4, a conflict) rather than silently sharing it."""
    if not isinstance(store, SqliteStore) or store.path == ":memory:":
        return None
    try:
        return take_owner_lock(store.path)
    except FileInUse as exc:
        raise _FileInUseError(str(exc)) from None


def _sealer(store: Store, secrets_key: str | None) -> tuple[Sealer | None, str]:
    """dev's sealer and where its key comes from (decision 0026): the configured key;
    else, on an SQLite file, a key kept beside it (made on the first start, mode 0600:
    the file's secrets are then safe in a copy of the file alone, as in a backup); an
    in-memory store gets a key of the process; PostgreSQL without a key: none."""
    configured = Sealer.from_text(secrets_key) if secrets_key else None
    if configured is None and not isinstance(store, SqliteStore):
        return None, ""
    path = store.path if isinstance(store, SqliteStore) else ":memory:"
    return dev_sealer(str(path), configured)


class _FileInUseError(click.ClickException):
    exit_code = 4  # the "conflict" of docs/api.md's exit codes


def _recovered(rescued: MaintenanceResult, pid: int | None) -> str:
    """What the start recovered of the runs its dead predecessor held."""
    n = len(rescued.retried) + len(rescued.dead) + len(rescued.cancelled) + len(rescued.unstarted)
    who = f"the previous cronwheel dev (pid {pid})" if pid else "the previous cronwheel dev"
    parts = [
        f"{len(ids)} {what}"
        for ids, what in (
            (rescued.retried, "claimable again"),
            (rescued.unstarted, "never started, claimable again"),
            (rescued.dead, "dead"),
            (rescued.cancelled, "cancelled"),
        )
        if ids
    ]
    runs = "run" if n == 1 else "runs"
    return f"recovered {n} {runs} {who} held when it died: {', '.join(parts)}"


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
@webhook_allow_option
@webhook_connections_option
@webhook_per_target_option
@allow_command_option
@command_grace_option
@secrets_key_option
@broker_option
def dev(
    db_url: str,
    app: str | None,
    pools: tuple[str, ...],
    concurrency: int | None,
    demo: bool,
    host: str,
    port: int,
    admin_token: str | None,
    access_log: bool,
    duration: float | None,
    metrics_tenant_labels: bool,
    webhook_allow: tuple[str, ...],
    webhook_connections: int,
    webhook_per_target: int,
    allow_commands: tuple[str, ...],
    command_grace_seconds: float,
    secrets_key: str | None,
    brokers: dict[str, str],
) -> None:
    """Everything in one process on one store file: API, scheduler, worker, maintenance."""
    if not is_loopback(host) and admin_token is None:
        raise click.UsageError(
            f"--host {host} is reachable from other machines: give --admin-token"
        )
    auth = AuthConfig(admin_token=admin_token, disabled=admin_token is None)
    registry = demo_handlers() if demo else registry_of(app)
    if demo and app is not None:
        registry.include(registry_of(app))
    # On loopback, dev is one person's machine: webhooks may reach it (the demo's echo
    # server listens there). Listening wider, it is as strict as a cluster.
    local = LOOPBACK if is_loopback(host) else ()
    config = WorkerConfig(
        pools=pools_of(pools, registry, concurrency, webhook_connections),
        webhook_allow=(*local, *webhook_allow),
        webhook_connections=webhook_connections,
        webhook_connections_per_target=webhook_per_target,
        brokers=brokers,
        allow_commands=allow_commands,
        command_grace_seconds=command_grace_seconds,
    )
    egress = EgressPolicy.from_env(*config.webhook_allow)
    webhook_secret()
    start_tracing()

    async def main() -> None:
        sock = listen_socket(host, port)  # a port in use is said before anything starts
        bound = sock.getsockname()[1]
        async with store_of(db_url) as store:
            owner = _own_file(store)
            try:
                await _dev(store, owner, sock, bound)
            finally:
                if owner is not None:
                    owner.release()

    async def _dev(store: Store, owner: OwnerLock | None, sock: socket.socket, bound: int) -> None:
        stop = asyncio.Event()
        stop_after(duration, stop)
        sealer, key_source = _sealer(store, secrets_key)
        worker = Worker(store, config, handlers=registry, sealer=sealer)
        maintenance = Maintenance(store)
        output = Output()
        output.line(
            f"cronwheel dev on {mask_url(db_url)} (pid {os.getpid()}), pools {dict(config.pools)}"
        )
        if sealer is None:
            output.line(
                "no secrets key (CRONWHEEL_SECRETS_KEY): webhook jobs with secret headers"
                " are refused"
            )
        else:
            output.line(f"secret webhook headers are stored encrypted; key: {key_source}")
        if brokers:
            output.line(f"publish jobs may name the brokers {describe_brokers(brokers)}")
        if owner is not None:
            # The lock was free: the dev before us is dead, and so are its workers.
            rescued = await maintenance.rescue_dead_owners(owner.previous)
            owner.record([worker.id])
            if rescued.retried or rescued.dead or rescued.cancelled or rescued.unstarted:
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
                egress=egress,
                sealer=sealer,
            ),
            Scheduler(store),
            worker,
            maintenance,
            Notifier(store, hooks=registry, egress=egress, sealer=sealer, busy=worker.saturated),
        ]
        note = "no authentication: loopback only" if auth.disabled else "token required"
        output.line(f"API on http://{host}:{bound}/v1 ({note}); docs at /docs, metrics at /metrics")
        output.line(f"dashboard at http://{host}:{bound}/ui/")
        if egress.allows_loopback:
            output.line("webhooks may reach this machine (loopback): fine for dev, not a cluster")
        if allow_commands:
            output.line(commands_line(allow_commands))
        with echo_server() as echo_url:
            if demo:
                created = await create_demo_jobs(
                    JobService(store, actor="demo", sealer=sealer), echo_url
                )
                output.line(f"demo: {created} example jobs created; watch them fire")
            tune_process()

            def console(s: asyncio.Event) -> Coroutine[Any, Any, None]:
                return watch_runs(
                    store, s, output=output, own_pools=config.pools, own_worker=worker.id
                )

            await serve(services, stop=stop, extra=[console])
        output.line("stopped")

    run_async(main)
    exit_past_lingering_threads()
