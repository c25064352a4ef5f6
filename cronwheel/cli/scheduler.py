"""``cronwheel scheduler``: materialise the runs of due jobs; several share the shards."""

from __future__ import annotations

import asyncio
import logging

import click

from cronwheel.cli._common import db_option, run_async
from cronwheel.cli._logs import log_options
from cronwheel.cli._metrics import metrics_endpoint, metrics_port_options
from cronwheel.cli.services import duration_option, stop_after, store_of
from cronwheel.engine.maintenance import Maintenance
from cronwheel.engine.runtime import serve, tune_process
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.shards import ShardingConfig
from cronwheel.security.redact import mask_url

log = logging.getLogger("cronwheel.cli")


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
        async with store_of(db_url) as store:
            stop = asyncio.Event()
            stop_after(duration, stop)
            service = Scheduler(store, sharding=sharding)
            holder = service.owner.holder if service.owner else "?"
            log.info("scheduler %s on %s, %d shards", holder, mask_url(db_url), shard_count)
            tune_process()
            with metrics_endpoint(metrics_port, metrics_host):
                await serve([service, Maintenance(store)], stop=stop)

    run_async(main)
