"""``cronwheel runs …``, ``cronwheel dlq …`` and ``cronwheel notifications …``: runs,
their attempts, dead letters, completion notifications."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from cronwheel.cli import names
from cronwheel.cli._logs import fail, say
from cronwheel.cli.describe import run_lines
from cronwheel.cli.remote._base import (
    NOTIFICATION_COLUMNS,
    RUN_COLUMNS,
    client,
    dump,
    remote_options,
    show,
)
from cronwheel.sdk import Client
from cronwheel.sdk.errors import NotFoundError

EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4


# -- runs -------------------------------------------------------------------------------
@click.group()
def runs() -> None:
    """Inspect, cancel and replay runs."""


def _run_verb(name: str, call: Callable[[Client, int], Any], help_text: str) -> None:
    @runs.command(name, help=help_text)
    @remote_options
    @click.argument("run_id", type=int)
    def command(url: str, token: str | None, as_json: bool, run_id: int) -> None:
        with client(url, token) as cw:
            show(call(cw, run_id), as_json, RUN_COLUMNS)


@runs.command("get")
@remote_options
@click.argument("run_id", type=int)
def runs_get(url: str, token: str | None, as_json: bool, run_id: int) -> None:
    """Show a run with its attempts: outcome, error, worker, fence, lag, duration."""
    with client(url, token) as cw:
        run = cw.get_run(run_id)
    if as_json:
        click.echo(json.dumps(dump(run), indent=2))
        return
    for line in run_lines(run.model_dump()):
        say(line)


_run_verb("cancel", Client.cancel_run, "Cancel a run (a running one stops at its next heartbeat).")
_run_verb("replay", Client.replay_run, "Replay a dead run with a fresh retry budget.")


# -- dead-letter queue ------------------------------------------------------------------
@click.group()
def dlq() -> None:
    """The dead-letter queue."""


@dlq.command("list")
@remote_options
@click.option("--job-id", "job", metavar="JOB", help="Only this job's (id, id prefix or name).")
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def dlq_list(url: str, token: str | None, as_json: bool, job: str | None, **filters: Any) -> None:
    """Dead runs, newest first."""
    with client(url, token) as cw:
        job_id = None if job is None else names.job_id(cw, job)
        show(cw.dead_letter(job_id=job_id, **filters), as_json, RUN_COLUMNS)


@dlq.command("replay")
@remote_options
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
    with client(url, token) as cw:
        job = None if job_id is None else names.job_id(cw, job_id)
        replayed = cw.replay_dead(list(run_ids) or None, job_id=job)
        # The API leaves out the runs it did not replay: say which, and why.
        left = [(i, _why_not_replayed(cw, i)) for i in dict.fromkeys(run_ids) if i not in replayed]
    if as_json:
        out: dict[str, Any] = {"replayed": replayed}
        if left:
            out["not_replayed"] = [{"id": i, "reason": why} for i, (why, _) in left]
        click.echo(json.dumps(out))
    else:
        click.echo(f"replayed {len(replayed)}: {replayed}")
    if not left:
        return
    # One line: not found (3) when any id is unknown, else conflict (4): not dead.
    code = EXIT_NOT_FOUND if any(c == EXIT_NOT_FOUND for _, (_, c) in left) else EXIT_CONFLICT
    fail("; ".join(f"run {run_id} not replayed: {why}" for run_id, (why, _) in left), code)


def _why_not_replayed(cw: Client, run_id: int) -> tuple[str, int]:
    """Why the API left a run out of a replay, with the exit code it calls for."""
    try:
        run = cw.get_run(run_id)
    except NotFoundError:
        return "not found", EXIT_NOT_FOUND
    return f"not dead (it is {run.state}; only dead runs are replayed)", EXIT_CONFLICT


# -- notifications ------------------------------------------------------------------------
@click.group()
def notifications() -> None:
    """Completion notifications and their dead letter (docs/workflows.md#notifications)."""


@notifications.command("list")
@remote_options
@click.option(
    "--state",
    type=click.Choice(["pending", "delivered", "dead"]),
    help="Only these (dead: the notifications' dead letter).",
)
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def notifications_list(url: str, token: str | None, as_json: bool, **filters: Any) -> None:
    """Notifications, newest first: event, target, state, tries, last error."""
    with client(url, token) as cw:
        show(cw.notifications(**filters), as_json, NOTIFICATION_COLUMNS)


@notifications.command("replay")
@remote_options
@click.argument("ids", type=int, nargs=-1, required=True)
def notifications_replay(url: str, token: str | None, as_json: bool, ids: tuple[int, ...]) -> None:
    """Deliver dead notifications again, by id (same event id, fresh tries)."""
    with client(url, token) as cw:
        replayed = cw.replay_notifications(list(ids))
    click.echo(
        json.dumps({"replayed": replayed}) if as_json else f"replayed {len(replayed)}: {replayed}"
    )
