"""``cronwheel worker``, and the options and helpers ``cronwheel scheduler`` and
``cronwheel dev`` share with it. Nothing here imports the web framework, the HTTP stack
or the scheduler: a worker starts in a fraction of the API's import time."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator

import click

from cronwheel.actions.handler import HandlerRegistry
from cronwheel.cli._common import (
    allow_command_option,
    command_grace_option,
    commands_line,
    db_option,
    run_async,
    secrets_key_option,
    start_tracing,
    webhook_allow_option,
)
from cronwheel.cli._logs import log_options
from cronwheel.cli._metrics import metrics_endpoint, metrics_port_options
from cronwheel.core.brokers import kind_of_url, parse_broker
from cronwheel.engine.maintenance import Maintenance
from cronwheel.engine.notifier import Notifier
from cronwheel.engine.runtime import exit_past_lingering_threads, load_handlers, serve, tune_process
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.security.redact import mask_url, register_secret, url_password
from cronwheel.store import open_store
from cronwheel.store.base import Store

log = logging.getLogger("cronwheel.cli")


ASYNC_CONCURRENCY = 2500
"""A pool's concurrency when ``--concurrency`` is not given and every handler of the pool
is async (or it runs only webhooks): chosen from measurements (bench/README.md, "Default
concurrency"). W1's rate rises with it up to about a thousand runs at once and is level
after; 4 x 2,500 claimed ahead holds a herd of 10,000 runs due at one instant (W2), which
a thousand did not (its last run started 1.2 s late). An idle slot costs nothing."""
SYNC_CONCURRENCY = 32
"""A pool's concurrency when it has a sync handler: each running sync handler holds a
thread, and past a few dozen threads a process spends its time switching between them.
Blocking I/O in sync handlers may want more (``--pool NAME=N``); CPU-bound ones a
process per core."""


WEBHOOK_CONNECTIONS = 100
"""Webhook requests a worker has in flight at most (``--webhook-connections``): chosen
from measurements against a receiver with 20-200 ms of latency (bench/README.md, "W7").
A worker process sends about 250-350 webhooks a second whatever the number past 50 (the
HTTP stack's CPU is the bound), and the more in flight, the later its event loop turns:
another tenant's run waited 90 ms at 100 and 470 ms at 400. A pool that runs only
webhooks gets this concurrency by default."""
WEBHOOK_CONNECTIONS_PER_TARGET = 50
"""Of those, the most one target (scheme, host, port) may hold: a slow or busy target
leaves room for the others (``--webhook-connections-per-target``)."""


def default_concurrency(
    registry: HandlerRegistry, pool: str, webhooks: int = WEBHOOK_CONNECTIONS
) -> int:
    """The concurrency of ``pool`` when none is given: :data:`SYNC_CONCURRENCY` with a
    sync handler, :data:`ASYNC_CONCURRENCY` with async handlers only, and ``webhooks``
    (the worker's webhook connections) for a pool without handlers: only webhooks run
    there, and no more of them can be in flight (decision 0036)."""
    handlers = [h for h in registry.handlers() if h.pool == pool]
    if not handlers:
        return webhooks
    sync = any(not h.is_async for h in handlers)
    return SYNC_CONCURRENCY if sync else ASYNC_CONCURRENCY


def pools_of(
    values: tuple[str, ...],
    registry: HandlerRegistry,
    concurrency: int | None,
    webhooks: int = WEBHOOK_CONNECTIONS,
) -> dict[str, int]:
    """``--pool reports`` or ``--pool reports=4``; none given: the handlers' pools. A pool
    without a number runs ``concurrency`` at once, or its default (by its handlers, and
    ``webhooks`` for a pool of webhooks only)."""

    def of(pool: str) -> int:
        if concurrency is not None:
            return concurrency
        return default_concurrency(registry, pool, webhooks)

    pools: dict[str, int] = {}
    for value in values:
        name, _, n = value.partition("=")
        if not name or (n and not n.isdigit()) or (n and int(n) < 1):
            raise click.BadParameter(
                f"{value!r}: expected NAME or NAME=CONCURRENCY", param_hint="--pool"
            )
        pools[name] = int(n) if n else of(name)
    return pools or {pool: of(pool) for pool in sorted(registry.pools or {"default"})}


def registry_of(app: str | None) -> HandlerRegistry:
    """The handlers ``--app`` names (none: only webhook jobs can run)."""
    if app is None:
        return HandlerRegistry()
    try:
        return load_handlers(app)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--app") from exc


@contextlib.asynccontextmanager
async def store_of(url: str) -> AsyncIterator[Store]:
    """The store at ``url``, migrated, closed when the block ends."""
    store = await open_store(url)
    try:
        await store.migrate()
        yield store
    finally:
        await store.close()


def webhook_secret() -> None:
    """The worker signs with CRONWHEEL_WEBHOOK_SECRET: never shown by this process."""
    register_secret(os.environ.get("CRONWHEEL_WEBHOOK_SECRET"))


def secrets_key_of(db_url: str, configured: str | None) -> str | None:
    """The secrets keys a process uses: ``--secrets-key`` (or CRONWHEEL_SECRETS_KEY); for
    an SQLite store without one, the key ``cronwheel dev`` keeps beside its file, if it
    made one (so a worker or an API on that file opens what dev sealed)."""
    if configured or not db_url.startswith("sqlite:"):
        return configured
    from cronwheel.store import sqlite_path

    path = sqlite_path(db_url)
    key_file = path.with_name(path.name + ".secrets-key")  # cronwheel.security.sealing.key_file
    if str(path) == ":memory:" or not key_file.is_file():
        return None
    keys = key_file.read_text().strip()
    register_secret(keys)
    return keys or None


def stop_after(seconds: float | None, stop: asyncio.Event) -> None:
    """``--duration``: set ``stop`` after so many seconds (None: never)."""
    if seconds is not None:
        asyncio.get_running_loop().call_later(seconds, stop.set)


app_option = click.option(
    "--app", default=None, help="Your handlers, as module:attribute (a Worker)."
)
pool_option = click.option(
    "--pool", "pools", multiple=True, help="A pool to serve: NAME or NAME=CONCURRENCY (repeatable)."
)
concurrency_option = click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=None,
    help=(
        f"Runs at once per pool [default: {ASYNC_CONCURRENCY} for a pool of async handlers,"
        f" {SYNC_CONCURRENCY} for one with a sync handler, --webhook-connections for one of"
        " webhooks only]."
    ),
)
webhook_connections_option = click.option(
    "--webhook-connections",
    type=click.IntRange(min=1, max=100_000),
    default=WEBHOOK_CONNECTIONS,
    show_default=True,
    help="Webhook requests in flight at most, all pools together (a pool of webhooks only"
    " runs this many at once unless its concurrency is given).",
)
webhook_per_target_option = click.option(
    "--webhook-connections-per-target",
    "webhook_per_target",
    type=click.IntRange(min=1, max=100_000),
    default=WEBHOOK_CONNECTIONS_PER_TARGET,
    show_default=True,
    help="Of those, the most one target (scheme, host, port) may hold.",
)


def _brokers(_: click.Context, __: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--broker NAME=URL`` entries as name → URL, each checked before anything starts:
    its form, its scheme, its client library. A URL's password is registered as a secret
    (never logged) and no error quotes a URL."""
    found: dict[str, str] = {}
    for value in values:
        try:
            name, url, _kind = parse_broker(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
        if name in found:
            raise click.BadParameter(f"{name}: named twice; give each broker one URL")
        register_secret(url_password(url))
        found[name] = url
    if not found:  # the publish package imports the HTTP stack: none of it without a broker
        return found
    from cronwheel.actions.publish.base import check_installed

    try:
        check_installed(found)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return found


broker_option = click.option(
    "--broker",
    "brokers",
    multiple=True,
    callback=_brokers,
    metavar="NAME=URL",
    help=(
        "A broker publish jobs may name (repeatable): NAME=nats://…, amqp://… or redis://…,"
        " with its extra installed (cronwheel[nats], [rabbitmq], [redis]). See"
        " docs/actions.md#publish."
    ),
)


def describe_brokers(brokers: dict[str, str]) -> str:
    """``events (nats), jobs (rabbitmq)``: what a process says of its brokers (no URL)."""
    return ", ".join(f"{name} ({kind_of_url(url).name})" for name, url in brokers.items())


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
@webhook_allow_option
@webhook_connections_option
@webhook_per_target_option
@allow_command_option
@command_grace_option
@secrets_key_option
@broker_option
def worker(
    db_url: str,
    app: str | None,
    pools: tuple[str, ...],
    concurrency: int | None,
    lease_seconds: float,
    grace_seconds: float,
    duration: float | None,
    metrics_port: int | None,
    metrics_host: str,
    webhook_allow: tuple[str, ...],
    webhook_connections: int,
    webhook_per_target: int,
    allow_commands: tuple[str, ...],
    command_grace_seconds: float,
    secrets_key: str | None,
    brokers: dict[str, str],
) -> None:
    """Execute runs of some pools: your handlers (--app), webhook and publish jobs, and the
    command jobs whose executable --allow-command allows."""
    registry = registry_of(app)
    config = WorkerConfig(
        pools=pools_of(pools, registry, concurrency, webhook_connections),
        webhook_connections=webhook_connections,
        webhook_connections_per_target=webhook_per_target,
        lease_seconds=lease_seconds,
        heartbeat_seconds=min(5.0, lease_seconds / 3),
        grace_seconds=grace_seconds,
        webhook_allow=webhook_allow,
        brokers=brokers,
        allow_commands=allow_commands,
        command_grace_seconds=command_grace_seconds,
    )

    webhook_secret()
    start_tracing()

    async def main() -> None:
        async with store_of(db_url) as store:
            stop = asyncio.Event()
            stop_after(duration, stop)
            keys = secrets_key_of(db_url, secrets_key)
            w = Worker(store, config, handlers=registry, sealer=keys)
            shown = mask_url(db_url)
            log.info("worker %s serving %s on %s", w.id, dict(config.pools), shown)
            log.info("webhooks may reach public addresses and %s", w.egress.describe())
            if brokers:
                log.info("publish jobs may name the brokers %s", describe_brokers(brokers))
            log.info("%s", commands_line(config.allow_commands))
            if keys is None:
                log.info(
                    "no secrets key (CRONWHEEL_SECRETS_KEY): a webhook with an encrypted"
                    " header fails, naming the missing key"
                )
            tune_process()
            with metrics_endpoint(metrics_port, metrics_host):
                # The notifier delivers the outbox the worker's completions write: every
                # worker process runs one (they share the rows, each claimed by one).
                notifier = Notifier(
                    store, hooks=registry, egress=w.egress, sealer=keys, busy=w.saturated
                )
                await serve([w, Maintenance(store), notifier], stop=stop)

    run_async(main)
    exit_past_lingering_threads()
