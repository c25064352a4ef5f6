"""``cronwheel migrate``: bring a store's schema up to date (creating the database first,
with ``--create-database``)."""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from cronwheel.cli._common import db_option, run_async
from cronwheel.cli._logs import log_options
from cronwheel.store import open_store


@click.command()
@log_options("info")
@db_option
@click.option("--to", "target", type=int, default=None, help="Stop at this migration number.")
@click.option(
    "--create-database",
    is_flag=True,
    help="PostgreSQL: create the database the URL names if it does not exist (connecting"
    " to the server's 'postgres' database as the URL's user). SQLite files are created"
    " anyway.",
)
def migrate(db_url: str, target: int | None, create_database: bool) -> None:
    """Apply the store's pending migrations (safe to run again, and from many hosts)."""

    async def main() -> list[int]:
        if create_database and urlsplit(db_url).scheme != "sqlite":
            from cronwheel.store.postgres._connect import create_database as create
            from cronwheel.store.postgres._connect import database_name, where

            created = await create(db_url)
            state = "created" if created else "exists already"
            click.echo(f'database "{database_name(db_url)}" on {where(db_url)} {state}')
        store = await open_store(db_url)
        try:
            applied = await store.migrate(target=target)
            click.echo(f"schema at version {await store.schema_version()}")
            return applied
        finally:
            await store.close()

    applied = run_async(main)
    click.echo(f"applied: {', '.join(map(str, applied))}" if applied else "nothing to apply")
