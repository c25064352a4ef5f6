"""``cronwheel migrate``: bring a store's schema up to date."""

from __future__ import annotations

import click

from cronwheel.cli._common import db_option, run_async
from cronwheel.store import open_store


@click.command()
@db_option
@click.option("--to", "target", type=int, default=None, help="Stop at this migration number.")
def migrate(db_url: str, target: int | None) -> None:
    """Apply the store's pending migrations (safe to run again, and from many hosts)."""

    async def main() -> list[int]:
        store = await open_store(db_url)
        try:
            applied = await store.migrate(target=target)
            click.echo(f"schema at version {await store.schema_version()}")
            return applied
        finally:
            await store.close()

    applied = run_async(main)
    click.echo(f"applied: {', '.join(map(str, applied))}" if applied else "nothing to apply")
