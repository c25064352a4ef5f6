"""``cronwheel tenants …`` and ``cronwheel keys …``: who may use the API."""

from __future__ import annotations

from typing import Any

import click

from cronwheel.cli._logs import say
from cronwheel.cli.remote._base import (
    KEY_COLUMNS,
    TENANT_COLUMNS,
    chosen_tenant,
    client,
    remote_options,
    show,
    tenant_option,
    token_option,
    url_option,
)
from cronwheel.cli.tables import Column


# -- tenants and keys -------------------------------------------------------------------
@click.group()
def tenants() -> None:
    """Tenants (system admins)."""


@tenants.command("create")
@remote_options
@click.argument("tenant_id")
@click.option("--name", default=None)
@click.option("--max-jobs", type=int, default=None)
@click.option("--max-creates-per-second", type=float, default=None)
@click.option(
    "--claim-weight",
    type=float,
    default=None,
    help="Its share of each claim beside other tenants' (default 1).",
)
@click.option(
    "--max-running", type=int, default=None, help="Its runs in flight at once, cluster-wide."
)
def tenants_create(
    url: str, token: str | None, as_json: bool, tenant_id: str, name: str | None, **quotas: Any
) -> None:
    """Create a tenant."""
    with client(url, token) as cw:
        show(
            cw.create_tenant(tenant_id, name or tenant_id, **quotas),
            as_json,
            TENANT_COLUMNS,
        )


_REMOVE = object()
"""A limit set to ``none``: sent as null (an option not given is not sent at all)."""


def _limit(kind: type[int] | type[float]) -> Any:
    """An option callback: a limit's new value, or ``none`` to remove it."""

    def convert(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
        if value is None:
            return None
        if value.strip().lower() == "none":
            return _REMOVE
        try:
            number = kind(value)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise click.BadParameter(
                f"expected {what} or 'none' (no limit), got {value!r}"
            ) from None
        return number  # its range is the server's to check (a 422 naming the field)

    return convert


@tenants.command("update")
@remote_options
@click.argument("tenant_id")
@click.option("--name", default=None)
@click.option(
    "--max-jobs", metavar="N|none", callback=_limit(int), help="Live jobs; 'none': no limit."
)
@click.option(
    "--max-creates-per-second",
    metavar="R|none",
    callback=_limit(float),
    help="Jobs and runs created per second, whole cluster; 'none': no limit.",
)
def tenants_update(
    url: str, token: str | None, as_json: bool, tenant_id: str, **changes: Any
) -> None:
    """Change a tenant's name or limits; options not given are kept."""
    sent = {k: (None if v is _REMOVE else v) for k, v in changes.items() if v is not None}
    if not sent:
        raise click.UsageError("give --name, --max-jobs or --max-creates-per-second")
    with client(url, token) as cw:
        show(cw.update_tenant(tenant_id, **sent), as_json, TENANT_COLUMNS)


@tenants.command("list")
@remote_options
def tenants_list(url: str, token: str | None, as_json: bool) -> None:
    """List tenants."""
    with client(url, token) as cw:
        show(cw.list_tenants(), as_json, TENANT_COLUMNS)


@click.group()
def keys() -> None:
    """API keys (admins)."""


@keys.command("create")
@remote_options
@click.option("--role", type=click.Choice(["admin", "write", "read", "worker"]), required=True)
@click.option("--name", default=None)
def keys_create(url: str, token: str | None, as_json: bool, role: str, name: str | None) -> None:
    """Create a key (in --tenant's tenant); its token is shown once."""
    with client(url, token) as cw:
        show(
            cw.create_key(role, name=name, tenant_id=chosen_tenant()),
            as_json,
            (*KEY_COLUMNS[:4], Column("token", kind="id")),
        )


@keys.command("list")
@remote_options
def keys_list(url: str, token: str | None, as_json: bool) -> None:
    """List keys (never their tokens), of --tenant's tenant."""
    with client(url, token) as cw:
        show(cw.list_keys(tenant_id=chosen_tenant()), as_json, KEY_COLUMNS)


@keys.command("revoke")
@url_option
@token_option
@tenant_option
@click.argument("key_id")
def keys_revoke(url: str, token: str | None, key_id: str) -> None:
    """Revoke a key at once."""
    with client(url, token) as cw:
        cw.revoke_key(key_id)
    say(f"revoked {key_id}")
