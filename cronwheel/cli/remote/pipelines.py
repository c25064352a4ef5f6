"""``cronwheel pipelines …``: define pipelines, change them into new versions, read
them back (decision 0025). Running pipelines is later work."""

from __future__ import annotations

import json
import re
from typing import Any, TextIO

import click

from cronwheel.cli._logs import fail
from cronwheel.cli.remote._base import client, dump, remote_options, show
from cronwheel.cli.tables import Column
from cronwheel.sdk import Client, PipelineInfo

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
EXIT_NOT_FOUND = 3
PIPELINE_HELP = "PIPELINE is a pipeline's id or the name of a live pipeline."


def _tasks(row: Any) -> int:
    return len(row.get("tasks") or {})


PIPELINE_COLUMNS = (
    Column("id", kind="id"),
    Column("name", kind="text"),
    Column("version"),
    Column("state", rank=1),
    Column("tasks", value=_tasks, rank=2),
    Column("updated_at", kind="time", rank=3),
)
VERSION_COLUMNS = (
    Column("version"),
    Column("created_at", kind="time"),
    Column("actor", kind="text", rank=1),
    Column("tasks", value=_tasks, rank=2),
    Column("fingerprint", kind="id", rank=3),
)


@click.group()
def pipelines() -> None:
    """Define pipelines: tasks and the edges between them, versioned."""


def _definition(file: TextIO) -> dict[str, Any]:
    """The JSON object in ``file``, or a usage error naming --file (exit 2)."""
    try:
        found = json.load(file)
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{file.name} is not JSON: {exc}", param_hint="--file") from exc
    if not isinstance(found, dict):
        raise click.BadParameter(
            f"{file.name} holds a JSON {type(found).__name__}; a pipeline is an object with"
            ' "tasks" and "edges"',
            param_hint="--file",
        )
    return found


def pipeline_id(cw: Client, ref: str) -> str:
    """The id of the pipeline ``ref`` names (its id, or a live pipeline's name); exits 3
    when there is none."""
    ref = ref.strip()
    if _UUID.match(ref.lower()):
        return ref.lower()
    named = [p for p in cw.list_pipelines(name=ref, limit=2).items if p.name == ref]
    if not named:
        fail(f"no live pipeline is named {ref!r}", EXIT_NOT_FOUND)
    return named[0].id


def _show_pipeline(found: PipelineInfo, as_json: bool) -> None:
    """A pipeline's row, then (for a person) its tasks and edges."""
    show(found, as_json, PIPELINE_COLUMNS)
    if as_json:
        return
    for name, task in found.tasks.items():
        action = task["action"]
        target = action.get("name") or action.get("url")
        extra = f"  fan_out max {task['fan_out']['max']}" if task.get("fan_out") else ""
        click.echo(f"  task {name}: {action['type']} {target}, pool {task['pool']}{extra}")
    for edge in found.edges:
        click.echo(f"  edge {edge['from']} → {edge['to']} ({edge['on']})")
    click.echo(f"  failure_policy: {found.failure_policy}")


@pipelines.command("create")
@remote_options
@click.option(
    "--file",
    type=click.File("r"),
    required=True,
    help='The definition as JSON ({"tasks", "edges", "failure_policy"}; "-" for stdin).',
)
@click.option("--name", default=None, help="The pipeline's name (default: the file's \"name\").")
@click.option("--idempotency-key", default=None, help="Makes a retried create safe.")
def pipelines_create(
    url: str,
    token: str | None,
    as_json: bool,
    file: TextIO,
    name: str | None,
    idempotency_key: str | None,
) -> None:
    """Create a pipeline from a definition file (version 1)."""
    definition = _definition(file)
    name = name or definition.pop("name", None)
    definition.pop("name", None)
    if not name:
        raise click.UsageError('give --name (or a "name" in the file)')
    with client(url, token) as cw:
        made = cw.create_pipeline(name, definition, idempotency_key=idempotency_key)
    _show_pipeline(made, as_json)


@pipelines.command("list")
@remote_options
@click.option("--name", default=None, help="Only the live pipeline of this name.")
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def pipelines_list(url: str, token: str | None, as_json: bool, **filters: Any) -> None:
    """List live pipelines (oldest first; --cursor for the next page)."""
    with client(url, token) as cw:
        show(cw.list_pipelines(**filters), as_json, PIPELINE_COLUMNS)


@pipelines.command("get", help=f"Show a pipeline's definition.\n\n{PIPELINE_HELP}")
@remote_options
@click.argument("pipeline", metavar="PIPELINE")
@click.option("--version", type=int, default=None, help="This version (default: the latest).")
def pipelines_get(
    url: str, token: str | None, as_json: bool, pipeline: str, version: int | None
) -> None:
    with client(url, token) as cw:
        found = cw.get_pipeline(pipeline_id(cw, pipeline), version=version)
    _show_pipeline(found, as_json)


@pipelines.command(
    "update",
    help="Store a new definition as the pipeline's next version; refused if the pipeline"
    " moved past --version. The same content keeps the version.\n\n" + PIPELINE_HELP,
)
@remote_options
@click.argument("pipeline", metavar="PIPELINE")
@click.option("--file", type=click.File("r"), required=True, help="The new definition as JSON.")
@click.option("--version", type=int, required=True, help="The version you are changing (If-Match).")
def pipelines_update(
    url: str, token: str | None, as_json: bool, pipeline: str, file: TextIO, version: int
) -> None:
    definition = _definition(file)
    definition.pop("name", None)  # a file made for create: the name does not change
    with client(url, token) as cw:
        changed = cw.update_pipeline(pipeline_id(cw, pipeline), version, definition)
    _show_pipeline(changed, as_json)


@pipelines.command("delete", help=f"Delete a pipeline (its versions stay).\n\n{PIPELINE_HELP}")
@remote_options
@click.argument("pipeline", metavar="PIPELINE")
def pipelines_delete(url: str, token: str | None, as_json: bool, pipeline: str) -> None:
    with client(url, token) as cw:
        show(cw.delete_pipeline(pipeline_id(cw, pipeline)), as_json, PIPELINE_COLUMNS)


@pipelines.command("versions", help=f"A pipeline's versions, newest first.\n\n{PIPELINE_HELP}")
@remote_options
@click.argument("pipeline", metavar="PIPELINE")
@click.option("--cursor")
@click.option("--limit", type=int, default=20)
def pipelines_versions(
    url: str, token: str | None, as_json: bool, pipeline: str, **filters: Any
) -> None:
    with client(url, token) as cw:
        found = cw.pipeline_versions(pipeline_id(cw, pipeline), **filters)
    if as_json:
        click.echo(json.dumps(dump(found), indent=2))
        return
    show(found, as_json, VERSION_COLUMNS)
