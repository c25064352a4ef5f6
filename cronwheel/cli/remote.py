"""``cronwheel jobs|runs|dlq|tenants|keys …``: the API from the terminal.

Human tables by default (ids and times never cut: see :mod:`cronwheel.cli.tables`),
tab-separated values in a pipe, ``--json`` for scripts. A job is named by its id, the
start of its id or its name (:mod:`cronwheel.cli.names`). Exit codes scripts can rely on:
0 ok · 1 other error · 2 bad input (usage, 400, 422, a job name that names several) ·
3 not found (404) · 4 conflict (409, 412, 428) · 5 not allowed (401, 403) · 6 server
unreachable or store unavailable (503) · 7 over quota (429).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TextIO, TypeVar

import click
import httpx
from pydantic import BaseModel

from cronwheel.cli import names
from cronwheel.cli.describe import job_lines, run_lines
from cronwheel.cli.tables import Column, print_table
from cronwheel.sdk import Client
from cronwheel.sdk.client import TENANT_HEADER
from cronwheel.sdk.errors import ApiError

T = TypeVar("T")

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
token_option = click.option(
    "--token", envvar="CRONWHEEL_TOKEN", default=None, help="API key (env CRONWHEEL_TOKEN)."
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


def chosen_tenant() -> str | None:
    """The tenant --tenant named for this command, if any."""
    return click.get_current_context().meta.get(_TENANT_KEY)


@contextmanager
def _client(url: str, token: str | None) -> Iterator[Client]:
    """A client (acting for --tenant's tenant) whose errors become a message on stderr
    and a meaningful exit code."""
    try:
        with Client(url, token, tenant=chosen_tenant()) as client:
            yield client
    except ApiError as exc:
        where = f" ({exc.field})" if exc.field else ""
        # The header is how the API hears --tenant: say it in the terms the user typed.
        message = f"{exc.detail}{where}".replace(TENANT_HEADER, "--tenant")
        click.echo(f"error: {message}", err=True)
        sys.exit(EXIT_CODES.get(exc.status, 1))
    except httpx.TransportError as exc:
        click.echo(f"error: cannot reach {url}: {exc}", err=True)
        sys.exit(6)


def _dump(value: Any) -> Any:
    """JSON-ready data, times written as the API writes them (``+00:00``, not ``Z``)."""
    if isinstance(value, BaseModel):
        return _dump(value.model_dump())
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _rows(value: Any) -> list[Any]:
    """The items of a page, of a list, or the one object, as dicts (times kept as
    datetimes: the table prints them as the API wrote them)."""
    items = getattr(value, "items", value)
    items = items if isinstance(items, list) else [items]
    return [i.model_dump() if isinstance(i, BaseModel) else i for i in items]


def _show(value: Any, as_json: bool, columns: tuple[Column, ...]) -> None:
    if as_json:
        click.echo(json.dumps(_dump(value), indent=2))
        return
    print_table(_rows(value), columns)
    cursor = getattr(value, "next_cursor", None)
    if cursor:
        click.echo(f"more: --cursor {cursor}", err=True)


def _attempts(row: Any) -> str:
    return f"{row.get('attempt')}/{row.get('max_attempts')}"


JOB_COLUMNS = (
    Column("id", kind="id"),
    Column("name", kind="text"),
    Column("state", rank=1),
    Column("next_fire_at", kind="time", rank=2),
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
TENANT_COLUMNS = (
    Column("id", kind="id"),
    Column("name", kind="text"),
    Column("max_jobs", rank=1),
    Column("max_creates_per_second", rank=2),
)
KEY_COLUMNS = (
    Column("id", kind="id"),
    Column("tenant_id", kind="id", rank=1),
    Column("role"),
    Column("name", kind="text", rank=2),
    Column("created_at", kind="time", rank=3),
    Column("revoked_at", kind="time", rank=4),
)


# -- jobs -------------------------------------------------------------------------------
@click.group()
def jobs() -> None:
    """Create and control jobs."""


def _schedule(
    cron: str | None,
    tz: str,
    at: str | None,
    delay: float | None,
    every: float | None,
    now: bool,
    manual: bool,
) -> dict[str, Any]:
    chosen = [
        k
        for k, v in {
            "--cron": cron,
            "--at": at,
            "--delay": delay,
            "--every": every,
            "--now": now or None,
            "--manual": manual or None,
        }.items()
        if v
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --cron, --at, --delay, --every, --now, --manual"
        )
    if manual:
        return {"kind": "manual"}
    if cron:
        return {"kind": "cron", "cron": cron, "timezone": tz}
    if at:
        return {"kind": "once", "at": at}
    if delay is not None:
        return {"kind": "delay", "seconds": delay}
    if every is not None:
        return {"kind": "interval", "every_seconds": every}
    return {"kind": "immediate"}


def _spec(options: dict[str, Any]) -> dict[str, Any]:
    if options["file"]:
        return dict(json.load(options["file"]))
    if not options["name"]:
        raise click.UsageError("--name is required (or give the whole spec with --file)")
    if bool(options["webhook"]) == bool(options["handler"]):
        raise click.UsageError("give exactly one of --webhook URL or --handler NAME")
    action = (
        {"type": "webhook", "url": options["webhook"], "method": options["method"]}
        if options["webhook"]
        else {"type": "handler", "name": options["handler"]}
    )
    spec: dict[str, Any] = {
        "name": options["name"],
        "schedule": _schedule(
            options["cron"],
            options["tz"],
            options["at"],
            options["delay"],
            options["every"],
            options["now"],
            options["manual"],
        ),
        "action": action,
        "pool": options["pool"],
    }
    if options["payload"] is not None:
        try:
            spec["payload"] = json.loads(options["payload"])
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from exc
    if options["max_attempts"] is not None:
        spec["retry"] = {"max_attempts": options["max_attempts"]}
    return spec


@jobs.command("create")
@url_option
@token_option
@tenant_option
@json_option
@click.option(
    "--file", type=click.File("r"), default=None, help="The whole job spec as JSON ('-' for stdin)."
)
@click.option("--name")
@click.option("--cron", help="A cron expression.")
@click.option("--tz", default="UTC", show_default=True, help="IANA timezone of --cron.")
@click.option("--at", help="Once, at this ISO 8601 instant.")
@click.option("--delay", type=float, help="Once, this many seconds from now.")
@click.option("--every", type=float, help="Every N seconds.")
@click.option("--now", is_flag=True, help="Run once, right now.")
@click.option("--manual", is_flag=True, help="Never by itself: only when triggered or enqueued to.")
@click.option("--webhook", help="Call this URL.")
@click.option("--method", default="POST", show_default=True)
@click.option("--handler", help="Run this registered handler.")
@click.option("--pool", default="default", show_default=True)
@click.option("--payload", help="JSON payload.")
@click.option("--max-attempts", type=int, default=None)
@click.option("--idempotency-key", default=None, help="Makes a retried create safe.")
def jobs_create(
    url: str, token: str | None, as_json: bool, idempotency_key: str | None, **options: Any
) -> None:
    """Create a job (from options, or --file spec.json)."""
    spec = _spec(options)
    with _client(url, token) as cw:
        _show(cw.create_job(spec, idempotency_key=idempotency_key), as_json, JOB_COLUMNS)


@jobs.command("list")
@url_option
@token_option
@tenant_option
@json_option
@click.option("--state")
@click.option("--pool")
@click.option("--name-prefix")
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def jobs_list(url: str, token: str | None, as_json: bool, **filters: Any) -> None:
    """List jobs (creation order; --cursor for the next page)."""
    with _client(url, token) as cw:
        _show(cw.list_jobs(**filters), as_json, JOB_COLUMNS)


JOB_ARGUMENT_HELP = "JOB is a job's id, the start of its id, or its name."


def _job_verb(name: str, call: Callable[[Client, str], Any], help_text: str) -> None:
    @jobs.command(name, help=f"{help_text}\n\n{JOB_ARGUMENT_HELP}")
    @url_option
    @token_option
    @tenant_option
    @json_option
    @click.argument("job", metavar="JOB")
    def command(url: str, token: str | None, as_json: bool, job: str) -> None:
        with _client(url, token) as cw:
            result = call(cw, names.job_id(cw, job))
            _show(result, as_json, RUN_COLUMNS if name == "trigger" else JOB_COLUMNS)


_job_verb("pause", Client.pause_job, "Pause a job: no new runs until resumed.")
_job_verb("resume", Client.resume_job, "Resume a paused job from now.")
_job_verb("trigger", Client.trigger_job, "Run a job now, besides its schedule.")
_job_verb("cancel", Client.cancel_job, "Cancel a job (soft delete; pending runs cancelled).")


@jobs.command("get")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("job", metavar="JOB")
def jobs_get(url: str, token: str | None, as_json: bool, job: str) -> None:
    """Show a whole job: its schedule in words and next fire times, action, policies,
    state and last outcome.

    JOB is a job's id, the start of its id, or its name."""
    with _client(url, token) as cw:
        found = cw.get_job(names.job_id(cw, job))
    if as_json:
        click.echo(json.dumps(_dump(found), indent=2))
        return
    for line in job_lines(found.model_dump()):
        click.echo(line)


def _json_value(text: str, hint: str) -> Any:
    """One JSON value, or a usage error naming the option (exit 2). NaN and Infinity are
    refused here: Python reads them, JSON has no such numbers."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:
        shown = text if len(text) <= 60 else f"{text[:57]}..."
        raise click.BadParameter(f"{shown!r} is not JSON: {exc}", param_hint=hint) from exc


def _payloads(values: tuple[str, ...], file: TextIO | None) -> list[Any]:
    if values and file is not None:
        raise click.UsageError("give --payload (repeatable) or --payloads-file, not both")
    if file is None:
        if not values:
            raise click.UsageError("give a --payload per run (repeatable) or --payloads-file")
        return [_json_value(value, "--payload") for value in values]
    try:
        text = file.read()
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"not UTF-8 text: {exc}", param_hint="--payloads-file") from exc
    payloads = _json_value(text, "--payloads-file")
    if not isinstance(payloads, list) or not payloads:
        raise click.BadParameter(
            'expected a JSON array with one payload per run, e.g. [{"id": 1}, {"id": 2}]',
            param_hint="--payloads-file",
        )
    return payloads


@jobs.command("enqueue")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("job", metavar="JOB")
@click.option(
    "--payload",
    "values",
    multiple=True,
    metavar="JSON",
    help="A run's payload, 'null' for the job's (repeatable: one run each).",
)
@click.option(
    "--payloads-file",
    type=click.File("r"),
    default=None,
    metavar="PATH",
    help="A JSON array of payloads, one run each ('-' for stdin).",
)
@click.option("--idempotency-key", default=None, help="Makes a retried enqueue safe.")
def jobs_enqueue(
    url: str,
    token: str | None,
    as_json: bool,
    job: str,
    values: tuple[str, ...],
    payloads_file: TextIO | None,
    idempotency_key: str | None,
) -> None:
    """Enqueue runs to a manual job, one per payload, all or nothing; print their ids.

    JOB is a job's id, the start of its id, or its name."""
    payloads = _payloads(values, payloads_file)
    with _client(url, token) as cw:
        run_ids = cw.enqueue(names.job_id(cw, job), payloads, idempotency_key=idempotency_key)
    click.echo(
        json.dumps({"run_ids": run_ids}) if as_json else f"enqueued {len(run_ids)}: {run_ids}"
    )


@jobs.command("update")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("job", metavar="JOB")
@click.option(
    "--version", "version", type=int, required=True, help="The version you are changing (If-Match)."
)
@click.option(
    "--set",
    "changes",
    multiple=True,
    help="FIELD=JSON, e.g. --set 'payload={\"a\":1}' (repeatable).",
)
def jobs_update(
    url: str, token: str | None, as_json: bool, job: str, version: int, changes: tuple[str, ...]
) -> None:
    """Change a job's fields; refused if it moved past --version.

    JOB is a job's id, the start of its id, or its name."""
    body: dict[str, Any] = {}
    for change in changes:
        key, sep, value = change.partition("=")
        if not sep:
            raise click.BadParameter(f"{change!r}: expected FIELD=JSON", param_hint="--set")
        try:
            body[key] = json.loads(value)
        except ValueError:
            body[key] = value  # a bare string: --set name=nightly
    with _client(url, token) as cw:
        _show(cw.update_job(names.job_id(cw, job), version, **body), as_json, JOB_COLUMNS)


@jobs.command("runs")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("job", metavar="JOB")
@click.option("--state")
@click.option("--cursor")
@click.option("--limit", type=int, default=20)
def jobs_runs(url: str, token: str | None, as_json: bool, job: str, **filters: Any) -> None:
    """A job's runs, newest first: did it run?

    JOB is a job's id, the start of its id, or its name."""
    with _client(url, token) as cw:
        _show(cw.job_runs(names.job_id(cw, job), **filters), as_json, RUN_COLUMNS)


# -- runs -------------------------------------------------------------------------------
@click.group()
def runs() -> None:
    """Inspect, cancel and replay runs."""


def _run_verb(name: str, call: Callable[[Client, int], Any], help_text: str) -> None:
    @runs.command(name, help=help_text)
    @url_option
    @token_option
    @tenant_option
    @json_option
    @click.argument("run_id", type=int)
    def command(url: str, token: str | None, as_json: bool, run_id: int) -> None:
        with _client(url, token) as cw:
            _show(call(cw, run_id), as_json, RUN_COLUMNS)


@runs.command("get")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("run_id", type=int)
def runs_get(url: str, token: str | None, as_json: bool, run_id: int) -> None:
    """Show a run with its attempts: outcome, error, worker, fence, lag, duration."""
    with _client(url, token) as cw:
        run = cw.get_run(run_id)
    if as_json:
        click.echo(json.dumps(_dump(run), indent=2))
        return
    for line in run_lines(run.model_dump()):
        click.echo(line)


_run_verb("cancel", Client.cancel_run, "Cancel a run (a running one stops at its next heartbeat).")
_run_verb("replay", Client.replay_run, "Replay a dead run with a fresh retry budget.")


# -- dead-letter queue ------------------------------------------------------------------
@click.group()
def dlq() -> None:
    """The dead-letter queue."""


@dlq.command("list")
@url_option
@token_option
@tenant_option
@json_option
@click.option("--job-id", "job", metavar="JOB", help="Only this job's (id, id prefix or name).")
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def dlq_list(url: str, token: str | None, as_json: bool, job: str | None, **filters: Any) -> None:
    """Dead runs, newest first."""
    with _client(url, token) as cw:
        job_id = None if job is None else names.job_id(cw, job)
        _show(cw.dead_letter(job_id=job_id, **filters), as_json, RUN_COLUMNS)


@dlq.command("replay")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("run_ids", type=int, nargs=-1)
@click.option(
    "--job-id", metavar="JOB", help="Replay every dead run of this job (id, id prefix or name)."
)
def dlq_replay(
    url: str, token: str | None, as_json: bool, run_ids: tuple[int, ...], job_id: str | None
) -> None:
    """Replay dead runs by id, or all of one job's."""
    if bool(run_ids) == bool(job_id):
        raise click.UsageError("give run ids or --job-id, not both")
    with _client(url, token) as cw:
        job = None if job_id is None else names.job_id(cw, job_id)
        replayed = cw.replay_dead(list(run_ids) or None, job_id=job)
    click.echo(
        json.dumps({"replayed": replayed}) if as_json else f"replayed {len(replayed)}: {replayed}"
    )


# -- tenants and keys -------------------------------------------------------------------
@click.group()
def tenants() -> None:
    """Tenants (system admins)."""


@tenants.command("create")
@url_option
@token_option
@tenant_option
@json_option
@click.argument("tenant_id")
@click.option("--name", default=None)
@click.option("--max-jobs", type=int, default=None)
@click.option("--max-creates-per-second", type=float, default=None)
def tenants_create(
    url: str, token: str | None, as_json: bool, tenant_id: str, name: str | None, **quotas: Any
) -> None:
    """Create a tenant."""
    with _client(url, token) as cw:
        _show(
            cw.create_tenant(tenant_id, name or tenant_id, **quotas),
            as_json,
            TENANT_COLUMNS,
        )


@tenants.command("list")
@url_option
@token_option
@tenant_option
@json_option
def tenants_list(url: str, token: str | None, as_json: bool) -> None:
    """List tenants."""
    with _client(url, token) as cw:
        _show(cw.list_tenants(), as_json, TENANT_COLUMNS)


@click.group()
def keys() -> None:
    """API keys (admins)."""


@keys.command("create")
@url_option
@token_option
@tenant_option
@json_option
@click.option("--role", type=click.Choice(["admin", "write", "read", "worker"]), required=True)
@click.option("--name", default=None)
def keys_create(url: str, token: str | None, as_json: bool, role: str, name: str | None) -> None:
    """Create a key (in --tenant's tenant); its token is shown once."""
    with _client(url, token) as cw:
        _show(
            cw.create_key(role, name=name, tenant_id=chosen_tenant()),
            as_json,
            (*KEY_COLUMNS[:4], Column("token", kind="id")),
        )


@keys.command("list")
@url_option
@token_option
@tenant_option
@json_option
def keys_list(url: str, token: str | None, as_json: bool) -> None:
    """List keys (never their tokens), of --tenant's tenant."""
    with _client(url, token) as cw:
        _show(cw.list_keys(tenant_id=chosen_tenant()), as_json, KEY_COLUMNS)


@keys.command("revoke")
@url_option
@token_option
@tenant_option
@click.argument("key_id")
def keys_revoke(url: str, token: str | None, key_id: str) -> None:
    """Revoke a key at once."""
    with _client(url, token) as cw:
        cw.revoke_key(key_id)
    click.echo(f"revoked {key_id}")


COMMANDS = (jobs, runs, dlq, tenants, keys)
