"""``cronwheel pools …``: pools' rate limits (decision 0033)."""

from __future__ import annotations

import click

from cronwheel.cli.remote._base import client, remote_options, show
from cronwheel.cli.tables import Column

RATE_COLUMNS = (Column("pool"), Column("per_second"))


@click.group()
def pools() -> None:
    """Pools shared by every tenant: their rate limits."""


@pools.command("rates")
@remote_options
def pools_rates(url: str, token: str | None, as_json: bool) -> None:
    """The rate-limited pools: run starts a second, across the cluster."""
    with client(url, token) as cw:
        rates = cw.pool_rates()
    show([{"pool": p, "per_second": r} for p, r in rates.items()], as_json, RATE_COLUMNS)


@pools.command("rate")
@remote_options
@click.argument("pool")
@click.argument("per_second", metavar="PER_SECOND|none")
def pools_rate(url: str, token: str | None, as_json: bool, pool: str, per_second: str) -> None:
    """Limit POOL to PER_SECOND run starts a second across the cluster (system admins);
    'none' removes the limit. Workers see it within 5 s."""
    rate: float | None = None
    if per_second != "none":
        try:
            rate = float(per_second)
        except ValueError:
            raise click.BadParameter(
                f"{per_second!r} is not a number of runs a second, or 'none'",
                param_hint="PER_SECOND",
            ) from None
    with client(url, token) as cw:
        rates = cw.set_pool_rate(pool, rate)
    show([{"pool": p, "per_second": r} for p, r in rates.items()], as_json, RATE_COLUMNS)
