"""``cronwheel secrets``: the key that encrypts secret webhook headers at rest
(docs/security.md#secrets-at-rest): make one, and re-encrypt what is stored with the
newest when rotating."""

from __future__ import annotations

import click

from cronwheel.cli._common import db_option, run_async, secrets_key_option
from cronwheel.cli.services import secrets_key_of, store_of


@click.group()
def secrets() -> None:
    """The secrets key: new-key, rotate."""


@secrets.command("new-key")
def new_key() -> None:
    """Print a new key for CRONWHEEL_SECRETS_KEY (keep it like a password)."""
    from cronwheel.security.sealing import generate_key

    click.echo(generate_key())


@secrets.command()
@db_option
@secrets_key_option
def rotate(db_url: str, secrets_key: str | None) -> None:
    """Re-encrypt every stored secret with the first key of --secrets-key.

    \b
    Rotating a key:
      1. give every API and worker NEW,OLD (the new key first) and restart them;
      2. run `cronwheel secrets rotate --secrets-key NEW,OLD`;
      3. give them NEW alone.
    Secrets stored in plain text by older versions are encrypted too.
    """
    keys = secrets_key_of(db_url, secrets_key)
    if keys is None:
        raise click.UsageError(
            "no key: give --secrets-key NEW,OLD (or CRONWHEEL_SECRETS_KEY), the new key first"
        )

    async def main() -> None:
        from cronwheel.control.secrets import rotate
        from cronwheel.core.clock import SystemClock
        from cronwheel.security.sealing import Sealer

        sealer = Sealer.from_text(keys)
        async with store_of(db_url) as store:
            done = await rotate(store, sealer, now=SystemClock().now())
        click.echo(f"{done.jobs_resealed} of {done.jobs_read} jobs re-encrypted with the first key")
        click.echo(
            f"{done.pipeline_versions_resealed} pipeline versions and"
            f" {done.task_runs_resealed} pipeline task runs re-encrypted"
        )
        if done.left:
            raise click.ClickException(
                f"{done.left} jobs changed while being re-encrypted: run rotate again"
                " before removing the old key"
            )

    run_async(main)
