"""``cronwheel jobs …``: create, list, show, change and control jobs, enqueue runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, TextIO

import click

from cronwheel.cli import hints, names
from cronwheel.cli._logs import hint, say
from cronwheel.cli.describe import job_lines
from cronwheel.cli.remote._base import (
    JOB_COLUMNS,
    RUN_COLUMNS,
    client,
    dump,
    remote_options,
    show,
    show_job,
    wall_clock,
)
from cronwheel.cli.tables import Column, print_table
from cronwheel.core.commandline import split_command_line
from cronwheel.core.model import JobOrder
from cronwheel.sdk import Client


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


ACTION_OPTIONS = ("--webhook", "--handler", "--command", "--publish")
_ONLY_WITH = {
    "method": ("--method", "--webhook"),
    "body": ("--body", "--webhook or --publish"),
    "env": ("--env", "--command"),
    "secret_env": ("--secret-env", "--command"),
    "cwd": ("--cwd", "--command"),
    "timeout": ("--timeout", "--command"),
    "permanent_exit_codes": ("--permanent-exit-code", "--command"),
}
"""The options that shape one kind of action: given with another kind, a usage error
names the option and the kind it belongs to rather than dropping it."""


def _env(values: tuple[str, ...]) -> dict[str, str]:
    env: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name:
            raise click.BadParameter(
                f"{value!r}: expected NAME=VALUE, e.g. --env PGHOST=db.internal",
                param_hint="--env",
            )
        if name in env:
            raise click.BadParameter(f"{name} is given twice", param_hint="--env")
        env[name] = text
    return env


def _command(options: dict[str, Any]) -> dict[str, Any]:
    try:
        argv = split_command_line(options["command"])
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--command") from None
    action: dict[str, Any] = {"type": "command", "argv": argv}
    if options["env"]:
        action["env"] = _env(options["env"])
    if options["secret_env"]:
        action["secret_env"] = list(options["secret_env"])
    if options["cwd"] is not None:
        action["cwd"] = options["cwd"]
    if options["timeout"] is not None:
        action["timeout_seconds"] = options["timeout"]
    if options["permanent_exit_codes"]:
        action["permanent_exit_codes"] = list(options["permanent_exit_codes"])
    return action


def _publish(options: dict[str, Any]) -> dict[str, Any]:
    broker, sep, to = options["publish"].partition(":")
    if not sep or not broker or not to:
        raise click.BadParameter(
            f"{options['publish']!r}: expected BROKER:TO, the NAME of a worker's"
            " --broker NAME=URL and where the message goes (--publish events:orders.created,"
            " --publish billing:invoices/created, --publish audit:audit-stream)",
            param_hint="--publish",
        )
    return {"type": "publish", "broker": broker, "to": to}


def _action(options: dict[str, Any]) -> dict[str, Any]:
    chosen = [o for o in ACTION_OPTIONS if options[o[2:]] is not None]
    if len(chosen) != 1:
        given = f" (given: {', '.join(chosen)})" if chosen else ""
        raise click.UsageError(
            "give exactly one action: --webhook URL, --handler NAME, --command LINE or"
            f" --publish BROKER:TO{given}"
        )
    kind = chosen[0][2:]
    for key, (option, owner) in _ONLY_WITH.items():
        if options[key] not in (None, ()) and f"--{kind}" not in owner:
            raise click.UsageError(f"{option} goes with {owner}, not --{kind}")
    action: dict[str, Any]
    if kind == "webhook":
        action = {"type": "webhook", "url": options["webhook"]}
        action["method"] = options["method"] or "POST"
    elif kind == "handler":
        action = {"type": "handler", "name": options["handler"]}
    elif kind == "command":
        action = _command(options)
    else:
        action = _publish(options)
    if options["body"] is not None:
        action["body"] = _json_value(options["body"], "--body")
    return action


def _spec(options: dict[str, Any]) -> dict[str, Any]:
    if options["file"]:
        return dict(json.load(options["file"]))
    if not options["name"]:
        raise click.UsageError("--name is required (or give the whole spec with --file)")
    action = _action(options)
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
@remote_options
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
@click.option("--webhook", metavar="URL", help="Call this URL.")
@click.option("--method", default=None, help="The webhook's HTTP method  [default: POST]")
@click.option("--handler", metavar="NAME", help="Run this registered handler.")
@click.option(
    "--command",
    metavar="LINE",
    help="Run this command line on a worker that allows it, split into words as a shell"
    " would ('...' and \"...\" quote) but run without one: | > && ; are refused"
    " (write sh -c '...').",
)
@click.option(
    "--env", multiple=True, metavar="NAME=VALUE", help="A variable for --command (repeatable)."
)
@click.option(
    "--secret-env",
    multiple=True,
    metavar="NAME",
    help="Store this --env variable encrypted, besides those whose name says they are secret.",
)
@click.option("--cwd", metavar="PATH", help="The directory --command runs in  [default: /]")
@click.option(
    "--timeout",
    type=float,
    metavar="SECONDS",
    help="How long one attempt of --command may run (the job's timeout too, by default).",
)
@click.option(
    "--permanent-exit-code",
    "permanent_exit_codes",
    type=int,
    multiple=True,
    metavar="CODE",
    help="An exit code of --command that no retry fixes: dead at once (repeatable).",
)
@click.option(
    "--publish",
    metavar="BROKER:TO",
    help="Publish a message to the workers' broker BROKER (their --broker NAME=URL), to"
    " TO: a subject, exchange/routing key or stream.",
)
@click.option(
    "--body",
    metavar="JSON",
    help="The message of --publish or the request body of --webhook (default: the run's envelope).",
)
@click.option("--pool", default="default", show_default=True)
@click.option("--payload", help="JSON payload.")
@click.option("--max-attempts", type=int, default=None)
@click.option("--idempotency-key", default=None, help="Makes a retried create safe.")
def jobs_create(
    url: str, token: str | None, as_json: bool, idempotency_key: str | None, **options: Any
) -> None:
    """Create a job (from options, or --file spec.json).

    Its action is one of --webhook, --handler, --command or --publish, e.g.
    --command 'pg_dump -f /backups/db.sql' --env PGHOST=db.internal, or
    --publish events:orders.created --body '{"order": 42}'."""
    spec = _spec(options)
    with client(url, token) as cw:
        show_job(cw.create_job(spec, idempotency_key=idempotency_key), as_json)


@jobs.command("list")
@remote_options
@click.option("--state")
@click.option("--pool")
@click.option("--name-prefix")
@click.option(
    "--order",
    type=click.Choice([o.value for o in JobOrder]),
    default=JobOrder.CREATED.value,
    show_default=True,
    help="By creation, name or next fire time (jobs that will not fire last); a leading -"
    " reverses it. Give the same --order with --cursor.",
)
@click.option("--cursor")
@click.option("--limit", type=int, default=100)
def jobs_list(url: str, token: str | None, as_json: bool, order: str, **filters: Any) -> None:
    """List jobs (oldest first, or in --order; --cursor for the next page)."""
    with client(url, token) as cw:
        again = "" if order == JobOrder.CREATED else f"--order={order} "
        show(cw.list_jobs(order=order, **filters), as_json, JOB_COLUMNS, again=again)


JOB_ARGUMENT_HELP = "JOB is a job's id, the start of its id, or its name."


def _job_verb(name: str, call: Callable[[Client, str], Any], help_text: str) -> None:
    @jobs.command(name, help=f"{help_text}\n\n{JOB_ARGUMENT_HELP}")
    @remote_options
    @click.argument("job", metavar="JOB")
    def command(url: str, token: str | None, as_json: bool, job: str) -> None:
        with client(url, token) as cw:
            result = call(cw, names.job_id(cw, job))
            if name == "trigger":
                show(result, as_json, RUN_COLUMNS)
            else:
                show_job(result, as_json)


_job_verb("pause", Client.pause_job, "Pause a job: no new runs until resumed.")
_job_verb("resume", Client.resume_job, "Resume a paused job from now.")
_job_verb("trigger", Client.trigger_job, "Run a job now, besides its schedule.")
_job_verb("cancel", Client.cancel_job, "Cancel a job (soft delete; pending runs cancelled).")


@jobs.command("get")
@remote_options
@click.argument("job", metavar="JOB")
def jobs_get(url: str, token: str | None, as_json: bool, job: str) -> None:
    """Show a whole job: its schedule in words and next fire times, action, policies,
    state and last outcome.

    JOB is a job's id, the start of its id, or its name."""
    with client(url, token) as cw:
        found = cw.get_job(names.job_id(cw, job))
    if as_json:
        click.echo(json.dumps(dump(found), indent=2))
        return
    for line in job_lines(found.model_dump()):
        say(line)


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
@remote_options
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
    with client(url, token) as cw:
        run_ids = cw.enqueue(names.job_id(cw, job), payloads, idempotency_key=idempotency_key)
    click.echo(
        json.dumps({"run_ids": run_ids}) if as_json else f"enqueued {len(run_ids)}: {run_ids}"
    )


@jobs.command("update")
@remote_options
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
    with client(url, token) as cw:
        show_job(cw.update_job(names.job_id(cw, job), version, **body), as_json)


@jobs.command("runs")
@remote_options
@click.argument("job", metavar="JOB")
@click.option("--state")
@click.option("--cursor")
@click.option("--limit", type=int, default=20)
def jobs_runs(url: str, token: str | None, as_json: bool, job: str, **filters: Any) -> None:
    """A job's runs, newest first: did it run? With none to list, says when the next
    is due (the scheduler creates a run shortly before it is due) or why there are none.

    JOB is a job's id, the start of its id, or its name."""
    with client(url, token) as cw:
        job_id = names.job_id(cw, job)
        page = cw.job_runs(job_id, **filters)
        show(page, as_json, RUN_COLUMNS)
        if not page.items and not filters.get("cursor") and not as_json:
            found = cw.get_job(job_id).model_dump()
            hint(hints.no_runs_line(found, wall_clock(), filters.get("state")))


WHY_FACTS = (
    Column("fact"),
    Column("value", kind="id"),
)
ATTEMPT_COLUMNS = (
    Column("attempt"),
    Column("outcome"),
    Column("finished_at", kind="time"),
    Column("lag_seconds", header="lag s", rank=2),
    Column("error_message", header="error", kind="text", rank=1),
)


def _fire(fire: Any) -> str | None:
    if not fire:
        return None
    return f"{fire['at']} [{fire['dst']}]" if fire.get("dst") else str(fire["at"])


def why_facts(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer's facts as (fact, value) rows: ids and times whole."""
    run = answer.get("run")
    facts = [
        ("job", f"{answer['job_id']} {answer['job_name']}"),
        ("asked", f"{answer['asked']} = {answer['at']} ({answer['timezone']})"),
        ("verdict", answer["verdict"]),
        ("occurrence", _fire(answer.get("occurrence"))),
        ("previous fire", _fire(answer.get("previous_fire"))),
        ("next fire", _fire(answer.get("next_fire"))),
    ]
    if run:
        facts.append(("run", f"{run['id']} {run['state']} {run['attempt']}/{run['max_attempts']}"))
    return [{"fact": k, "value": v} for k, v in facts if v is not None]


@jobs.command("why")
@remote_options
@click.argument("job", metavar="JOB")
@click.option(
    "--at",
    "at",
    default=None,
    metavar="TIME",
    help="HH:MM (today, in the job's zone) or an ISO 8601 date-time"
    " [default: the latest occurrence at or before now].",
)
def jobs_why(url: str, token: str | None, as_json: bool, job: str, at: str | None) -> None:
    """Why didn't JOB run at TIME (by default, at its latest occurrence)? Shows the run
    of the occurrence at that time (its state, attempts and reason), or the skip and
    why, or that no occurrence falls there with the schedule's fire times around it (DST
    marked), and whether the job was paused or did not exist yet.

    JOB is a job's id, the start of its id, or its name."""
    with client(url, token) as cw:
        answer = cw.why(names.job_id(cw, job), at)
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return
    for line in answer["explanation"]:
        say(line)
    click.echo("")
    print_table(why_facts(answer), WHY_FACTS)
    if answer["attempts"]:
        click.echo("")
        print_table(answer["attempts"], ATTEMPT_COLUMNS)


def _instant(ctx: click.Context, param: click.Parameter, value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 date-time (e.g. 2026-11-01T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise click.BadParameter(f"{value!r} has no UTC offset: add Z or +01:00, say")
    return moment


@jobs.command("backfill")
@remote_options
@click.argument("job", metavar="JOB")
@click.option(
    "--from", "start", required=True, callback=_instant, help="The range's start (ISO 8601)."
)
@click.option(
    "--to", "end", required=True, callback=_instant, help="The range's end, excluded (ISO 8601)."
)
@click.option(
    "--priority",
    type=click.Choice(["critical", "high", "normal", "low"]),
    default=None,
    help="The runs' priority (default: low, so live work goes first).",
)
def jobs_backfill(
    url: str,
    token: str | None,
    as_json: bool,
    job: str,
    start: datetime,
    end: datetime,
    priority: str | None,
) -> None:
    """Give a run to every past occurrence of JOB's schedule from --from to --to that has
    none; a second backfill of the same range creates nothing.

    JOB is a job's id, the start of its id, or its name."""
    with client(url, token) as cw:
        done = cw.backfill(names.job_id(cw, job), start, end, priority=priority)
    if as_json:
        click.echo(json.dumps(dump(done)))
        return
    if done.first is None or done.last is None:
        click.echo("no occurrence of the schedule in that range")
        return
    kept = done.occurrences - done.created
    click.echo(
        f"{done.occurrences} occurrences from {done.first.isoformat()} to"
        f" {done.last.isoformat()}: {done.created} runs created, {kept} already had one"
    )
