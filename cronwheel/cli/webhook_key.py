"""``cronwheel webhook-key TENANT``: the key a tenant's receivers verify its webhooks with.

Local only: it reads the operator's secret from ``CRONWHEEL_WEBHOOK_SECRET`` (as the
workers do) and derives the tenant's key from it; no API serves it, so no token can fetch
another tenant's key. See docs/security.md."""

from __future__ import annotations

import os

import click

from cronwheel.cli._common import Failure
from cronwheel.cli._logs import log_options
from cronwheel.security.redact import register_secret
from cronwheel.security.signing import tenant_key


@click.command("webhook-key")
@log_options("warning")
@click.argument("tenant_id")
def webhook_key(tenant_id: str) -> None:
    """Print TENANT_ID's webhook signing key (hex), from env CRONWHEEL_WEBHOOK_SECRET."""
    secret = os.environ.get("CRONWHEEL_WEBHOOK_SECRET", "")
    if not secret:
        raise Failure(
            "CRONWHEEL_WEBHOOK_SECRET is not set: export the secret your workers sign"
            " with, then run this again",
            2,
        )
    register_secret(secret)
    click.echo(tenant_key(secret.encode(), tenant_id).hex())
