"""``cronwheel audit``: who changed what, when (admins; docs/cli.md#audit)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from cronwheel.cli.remote._base import client, remote_options, show
from cronwheel.cli.tables import Column

AUDIT_COLUMNS = (
    Column("at", kind="time"),
    Column("entity"),
    Column("action"),
    Column("actor", kind="text", rank=1),
    Column("entity_id", header="entity id", kind="id", rank=2),
    Column("tenant_id", header="tenant", rank=3),
    Column("id", rank=4),
)


@click.command()
@remote_options
@click.option("--actor", default=None, help="Only this actor's changes, e.g. key:<key id>.")
@click.option(
    "--entity",
    type=click.Choice(["job", "run", "pipeline", "tenant", "key"]),
    default=None,
    help="Only changes to this kind of entity.",
)
@click.option(
    "--since",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]),
    default=None,
    help="Changes at or after this instant (ISO 8601; without a zone: UTC).",
)
@click.option(
    "--until",
    type=click.DateTime(["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d"]),
    default=None,
    help="Changes before this instant.",
)
@click.option("--cursor", default=None, help="The cursor the previous page printed.")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
def audit(
    url: str,
    token: str | None,
    as_json: bool,
    since: datetime | None,
    until: datetime | None,
    **filters: Any,
) -> None:
    """The audit log, newest first: every change to jobs, runs, pipelines, tenants and
    keys. A tenant's admin sees its tenant's; a system admin every tenant's (or one's,
    with --tenant)."""
    with client(url, token) as cw:
        page = cw.audit(since=_utc(since), until=_utc(until), **filters)
        show(page, as_json, AUDIT_COLUMNS)


def _utc(moment: datetime | None) -> datetime | None:
    """A zone-less instant is UTC (as the API's times are)."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
