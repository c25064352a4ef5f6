"""``cronwheel pipelines …``: define pipelines, change them into new versions, read
them back; start pipeline runs, list them, show one as a tree of its tasks, cancel one,
retry a dead task (decision 0025)."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any, TextIO

import click

from cronwheel.cli import hints
from cronwheel.cli._logs import fail, say
from cronwheel.cli.pipeline_view import run_lines
from cronwheel.cli.remote._base import client, dump, remote_options, show, wall_clock
from cronwheel.cli.tables import Column, is_terminal
from cronwheel.core.ids import is_uuid
from cronwheel.sdk import Client, PipelineInfo, PipelineRunInfo
from cronwheel.sdk.errors import ApiError

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


def _age(row: Any) -> str:
    started = row.get("created_at")
    if not isinstance(started, datetime):
        return ""
    return hints.span((wall_clock() - started).total_seconds()) + " ago"


RUN_COLUMNS = (
    Column("id", kind="id"),
    Column("state"),
    Column(
        "created_at",
        header="started",
        kind="time",
        rank=1,
        # 32 characters whole: "4 min 5 s ago" keeps the row on an 80-column terminal.
        narrow=Column("age", header="started", kind="time", value=_age),
    ),
    Column("version", rank=2),
    Column("finished_at", header="finished", kind="time", rank=4),
    Column("pipeline_id", kind="id", rank=3),
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
    """Define pipelines (tasks and the edges between them, versioned) and run them."""


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
    if is_uuid(ref.lower()):
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
        say(f"  task {name}: {action['type']} {target}, pool {task['pool']}{extra}")
    for edge in found.edges:
        say(f"  edge {edge['from']} → {edge['to']} ({edge['on']})")
    say(f"  failure_policy: {found.failure_policy}")


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


# -- pipeline runs ------------------------------------------------------------------------
RUN_ID_HELP = "RUN_ID is a pipeline run's id (a UUID, as `pipelines runs` lists them)."
EXIT_RUN_FAILED = 1
FINAL = ("succeeded", "failed", "cancelled")


def _run_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A pipeline run id, or a usage error (exit 2) saying what one looks like."""
    found = value.strip().lower()
    if not is_uuid(found):
        raise click.BadParameter(
            f"{value!r} is not a pipeline run id: one is a UUID such as"
            " 01a20fb1-2a31-7000-a6cc-ed0f31ac26b2 (`cronwheel pipelines runs` lists them)",
            ctx=ctx,
            param=param,
        )
    return found


run_id_argument = click.argument("run_id", metavar="RUN_ID", callback=_run_id)


def _show_run(cw: Client, run: PipelineRunInfo, as_json: bool) -> None:
    """A pipeline run as JSON, or its facts and its tasks as a tree: the tree needs the
    pipeline at the run's version."""
    if as_json:
        click.echo(json.dumps(dump(run), indent=2))
        return
    try:
        pipeline: dict[str, Any] | None = cw.get_pipeline(
            run.pipeline_id, version=run.version
        ).model_dump()
    except ApiError:  # e.g. a read that races a deletion: the run's own facts still show
        pipeline = None
    from rich.console import Console

    width = Console().width if is_terminal() else None
    for line in run_lines(dump(run), pipeline, width):
        say(line)


def _wait(cw: Client, run: PipelineRunInfo) -> PipelineRunInfo:
    """The run once it has ended, read again and again (at most every 2 s)."""
    pause = 0.2
    while run.state not in FINAL:
        time.sleep(pause)
        pause = min(pause * 1.5, 2.0)
        run = cw.get_pipeline_run(run.id)
    return run


@pipelines.command(
    "run",
    short_help="Start a pipeline run (--wait for its end).",
    help="Start a run of a pipeline's latest version and show it (its root tasks start"
    " with it). With --wait, wait until it has ended: exit 0 if it succeeded, 1 if it"
    " failed or was cancelled.\n\n" + PIPELINE_HELP,
)
@remote_options
@click.argument("pipeline", metavar="PIPELINE")
@click.option(
    "--idempotency-key", default=None, help="Makes a retried start safe: one run per key."
)
@click.option("--wait", is_flag=True, help="Wait until the run has ended, then show it.")
def pipelines_run(
    url: str,
    token: str | None,
    as_json: bool,
    pipeline: str,
    idempotency_key: str | None,
    wait: bool,
) -> None:
    with client(url, token) as cw:
        run = cw.start_pipeline(pipeline_id(cw, pipeline), idempotency_key=idempotency_key)
        if wait:
            run = _wait(cw, run)
        _show_run(cw, run, as_json)
    if wait and run.state != "succeeded":
        raise SystemExit(EXIT_RUN_FAILED)


@pipelines.command(
    "runs",
    short_help="Pipeline runs, newest first.",
    help="Pipeline runs, newest first: of PIPELINE (its id or a live pipeline's name), or"
    " of every pipeline.",
)
@remote_options
@click.argument("pipeline", metavar="[PIPELINE]", required=False)
@click.option(
    "--state",
    type=click.Choice(["running", "succeeded", "failed", "cancelled"]),
    help="Only the runs in this state.",
)
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def pipelines_runs(
    url: str, token: str | None, as_json: bool, pipeline: str | None, **filters: Any
) -> None:
    with client(url, token) as cw:
        found = None if pipeline is None else pipeline_id(cw, pipeline)
        show(cw.list_pipeline_runs(found, **filters), as_json, RUN_COLUMNS)


@pipelines.command(
    "get-run",
    short_help="Show a pipeline run as a tree of its tasks.",
    help="Show a pipeline run: its state, then its tasks as a tree, each under the task it"
    " waits for that runs last (`also after:` names the others), with its state, why it"
    " was skipped, its run id, a fanned-out task's instances counted by state; `waiting`:"
    " not started yet.\n\n" + RUN_ID_HELP,
)
@remote_options
@run_id_argument
def pipelines_get_run(url: str, token: str | None, as_json: bool, run_id: str) -> None:
    with client(url, token) as cw:
        _show_run(cw, cw.get_pipeline_run(run_id), as_json)


@pipelines.command(
    "cancel",
    short_help="Cancel a pipeline run.",
    help="Cancel a pipeline run: its pending tasks are cancelled, its running ones asked to"
    " stop, and nothing new starts. Cancelling it again changes nothing.\n\n" + RUN_ID_HELP,
)
@remote_options
@run_id_argument
def pipelines_cancel(url: str, token: str | None, as_json: bool, run_id: str) -> None:
    with client(url, token) as cw:
        _show_run(cw, cw.cancel_pipeline_run(run_id), as_json)


@pipelines.command(
    "retry",
    short_help="Run a dead task of a pipeline run again.",
    help="Run a dead task of a pipeline run again (its run is replayed with a fresh retry"
    " budget); the tasks skipped because it failed wait for it again.\n\n" + RUN_ID_HELP,
)
@remote_options
@run_id_argument
@click.argument("task")
def pipelines_retry(url: str, token: str | None, as_json: bool, run_id: str, task: str) -> None:
    with client(url, token) as cw:
        _show_run(cw, cw.retry_pipeline_task(run_id, task), as_json)
