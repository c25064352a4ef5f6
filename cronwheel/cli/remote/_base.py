"""What every remote command shares: --url, --token, --tenant and --json, the client
whose errors become a message and an exit code, and the columns of each table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import httpx
from pydantic import BaseModel

from cronwheel.cli import hints
from cronwheel.cli._logs import fail, hint
from cronwheel.cli.tables import Column, print_table
from cronwheel.sdk import Client
from cronwheel.sdk.client import TENANT_HEADER
from cronwheel.sdk.errors import ApiError
from cronwheel.security.redact import mask_url, register_secret

EXIT_CODES = {
    400: 2,
    413: 2,
    422: 2,
    404: 3,
    409: 4,
    412: 4,
    428: 4,
    401: 5,
    403: 5,
    429: 7,
    503: 6,
}

url_option = click.option(
    "--url",
    envvar="CRONWHEEL_URL",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="API base URL (env CRONWHEEL_URL).",
)


def _secret(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    register_secret(value)  # never in a line this process writes, --log-level debug's too
    return value


token_option = click.option(
    "--token",
    envvar="CRONWHEEL_TOKEN",
    default=None,
    callback=_secret,
    help="API key (env CRONWHEEL_TOKEN).",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
_TENANT_KEY = "cronwheel.tenant"


def _remember_tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    ctx.meta[_TENANT_KEY] = value


tenant_option = click.option(
    "--tenant",
    envvar="CRONWHEEL_TENANT",
    default=None,
    expose_value=False,
    callback=_remember_tenant,
    help="Act for this tenant (system admins only; env CRONWHEEL_TENANT).",
)
"""Every remote command takes it; :func:`_client` sends it as the ``Cronwheel-Tenant``
header, so the commands need not pass it along."""


F = TypeVar("F", bound=Callable[..., Any])


def remote_options(fn: F) -> F:
    """``--url``, ``--token``, ``--tenant`` and ``--json``: what every remote command takes."""
    return url_option(token_option(tenant_option(json_option(fn))))


def chosen_tenant() -> str | None:
    """The tenant --tenant named for this command, if any."""
    return click.get_current_context().meta.get(_TENANT_KEY)


@contextmanager
def client(url: str, token: str | None) -> Iterator[Client]:
    """A client (acting for --tenant's tenant) whose errors become a message on stderr
    (a JSON line with --log-format json) and a meaningful exit code."""
    try:
        with Client(url, token, tenant=chosen_tenant()) as client:
            yield client
    except ApiError as exc:
        where = f" ({exc.field})" if exc.field else ""
        # The header is how the API hears --tenant: say it in the terms the user typed.
        message = f"{exc.detail}{where}".replace(TENANT_HEADER, "--tenant")
        if exc.status == 401 and not token:
            # The header is how the API hears --token: say how to give one.
            message = (
                "no API key given: pass --token KEY or set CRONWHEEL_TOKEN"
                " (the --admin-token of `cronwheel api`, or a key from `cronwheel keys create`)"
            )
        fail(message, EXIT_CODES.get(exc.status, 1))
    except httpx.TransportError as exc:
        fail(f"cannot reach {mask_url(url)}: {exc}", 6)


def dump(value: Any) -> Any:
    """JSON-ready data, times written as the API writes them (``+00:00``, not ``Z``)."""
    if isinstance(value, BaseModel):
        return dump(value.model_dump())
    if isinstance(value, list):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _rows(value: Any) -> list[Any]:
    """The items of a page, of a list, or the one object, as dicts (times kept as
    datetimes: the table prints them as the API wrote them)."""
    items = getattr(value, "items", value)
    items = items if isinstance(items, list) else [items]
    return [i.model_dump() if isinstance(i, BaseModel) else i for i in items]


def show(value: Any, as_json: bool, columns: tuple[Column, ...], *, again: str = "") -> None:
    """A value as JSON or a table; for a page with more, how to ask for the next one
    (``again``: the options that must come back with its cursor, e.g. the order)."""
    if as_json:
        click.echo(json.dumps(dump(value), indent=2))
        return
    print_table(_rows(value), columns)
    cursor = getattr(value, "next_cursor", None)
    if cursor:
        hint(f"more: {again}--cursor {cursor}")


def show_job(job: Any, as_json: bool) -> None:
    """One job as a table, then (for a person, on stderr: a pipe keeps its rows) when
    it fires next or why it does not by itself."""
    show(job, as_json, JOB_COLUMNS)
    if not as_json:
        hint(hints.fire_line(_rows(job)[0], wall_clock()))


def wall_clock() -> datetime:
    """This machine's clock, which relative times ("in 58 s") are measured against."""
    return datetime.now(UTC)


def _next_in(row: Any) -> str:
    return hints.next_in(row, wall_clock())


def _attempts(row: Any) -> str:
    return f"{row.get('attempt')}/{row.get('max_attempts')}"


JOB_COLUMNS = (
    Column("id", kind="id"),
    Column("name", kind="text"),
    Column("state", rank=1),
    Column(
        "next_fire_at",
        kind="time",
        rank=2,
        value=hints.next_fire,  # a paused job keeps its next_fire_at, but will not fire
        # 25 to 32 characters whole; "in 3 h 5 min" keeps it on an 80-column terminal.
        narrow=Column("next_fire_in", header="next fire", kind="time", value=_next_in),
    ),
    Column("pool", rank=3),
    Column("version", rank=4),
)
RUN_COLUMNS = (
    Column("id"),
    Column("scheduled_for", kind="time"),
    Column("state"),
    Column("attempt", rank=1, value=_attempts),
    Column("last_error", kind="text", rank=2),
    Column("job_id", kind="id", rank=3),
    Column("reason", kind="text", rank=4),
)
NOTIFICATION_COLUMNS = (
    Column("id"),
    Column("event_id", kind="id"),
    Column("state"),
    Column("tries", rank=1),
    Column("url", kind="text", rank=2),
    Column("last_error", kind="text", rank=3),
)
TENANT_COLUMNS = (
    Column("id", kind="id"),
    Column("name", kind="text"),
    Column("max_jobs", rank=1),
    Column("max_creates_per_second", rank=2),
    Column("claim_weight", rank=3),
    Column("max_running", rank=3),
)
KEY_COLUMNS = (
    Column("id", kind="id"),
    Column("tenant_id", kind="id", rank=1),
    Column("role"),
    Column("name", kind="text", rank=2),
    Column("created_at", kind="time", rank=3),
    Column("revoked_at", kind="time", rank=4),
)
