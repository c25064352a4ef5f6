"""``cronwheel import crontab FILE``: a crontab as command jobs, and ``cronwheel import
cronjob FILE``: Kubernetes CronJobs as command jobs (decision 0052 and its addenda)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TextIO

import click

from cronwheel.cli._logs import fail, hint, say
from cronwheel.cli.remote._base import client, remote_options
from cronwheel.cli.tables import Column, print_table
from cronwheel.core.cronjob import parse_cronjobs
from cronwheel.core.crontab import (
    USER_NAME,
    CrontabError,
    Entry,
    Notice,
    check_specs,
    parse_crontab,
)
from cronwheel.sdk import Client, JobInfo

EXIT_INVALID = 2
COLUMNS = (
    Column("line"),
    Column("result"),
    Column("name", kind="text"),
    Column("schedule", kind="text", rank=1),
)


@click.group("import")
def import_() -> None:
    """Import jobs written for another scheduler."""


def _read(file: TextIO) -> str:
    try:
        return file.read()
    except UnicodeDecodeError as exc:
        fail(f"{file.name}: not UTF-8 text: {exc}", EXIT_INVALID)


def _refuse(problems: list[Notice], as_json: bool, what: str = "line") -> None:
    if as_json:
        lines = [{"line": p.line, "error": p.message} for p in problems]
        click.echo(json.dumps({"errors": lines}, indent=2))
    for problem in problems:
        say(f"error: line {problem.line}: {problem.message}", err=True)
    fail(f"nothing imported: {len(problems)} {what}(s) cannot be imported", EXIT_INVALID)


def _existing(cw: Client, name: str) -> JobInfo | None:
    """The live job of this name, if any (a cancelled one is history: a new one is made)."""
    found = [j for j in cw.list_jobs(name=name, limit=10).items if j.name == name]
    live = [job for job in found if job.state != "cancelled"]
    return live[0] if live else None


def _fingerprint(job: JobInfo) -> object:
    payload = job.payload if isinstance(job.payload, dict) else {}
    return payload.get("fingerprint")


@import_.command("crontab")
@remote_options
@click.argument("file", type=click.File("r"), metavar="FILE|-")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--pool", default="default", show_default=True, help="The jobs' pool.")
@click.option(
    "--tz",
    default="UTC",
    show_default=True,
    help="The zone of the entries before any CRON_TZ= or TZ= line.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 7 * 86_400),
    default=3600,
    show_default=True,
    help="How long one run of an entry may take, in seconds (cron has no limit).",
)
@click.option(
    "--system",
    is_flag=True,
    help="FILE is a system crontab (/etc/crontab, /etc/cron.d/*): a user field follows"
    " the five time fields. Needs --as-user.",
)
@click.option(
    "--as-user",
    metavar="USER",
    help="With --system: import the lines of USER, the OS user the pool's workers run as;"
    " other users' lines are left out, with a warning each.",
)
def import_crontab(
    url: str,
    token: str | None,
    as_json: bool,
    file: TextIO,
    dry_run: bool,
    pool: str,
    tz: str,
    timeout: float,
    system: bool,
    as_user: str | None,
) -> None:
    """Make a job of each entry of a user's crontab (FILE, or - for stdin), run by the
    crontab's shell (/bin/sh unless SHELL= says otherwise): workers must allow it with
    --allow-command /bin/sh. Importing the same file again changes nothing; an entry
    whose schedule or environment changed updates its job; nothing is imported while any
    line is invalid. @reboot is refused. Jobs of lines since removed are left as they are.

    A system crontab (--system --as-user USER): USER's lines only. A worker runs commands
    as its own OS user, whatever the line says, so import each user's lines into a pool
    whose workers run as that user.
    """
    _check_system(file, system, as_user)
    try:
        crontab = parse_crontab(_read(file), timezone=tz, system_user=as_user)
    except CrontabError as exc:
        _refuse(exc.problems, as_json)
        return
    if as_user is not None and not crontab.entries and crontab.other_users:
        users = ", ".join(sorted(crontab.other_users))
        fail(
            f"nothing imported: no line runs as {as_user!r} (--as-user); the file's"
            f" users are {users}",
            EXIT_INVALID,
        )
    specs = [(e, e.spec(pool=pool, timeout_seconds=timeout)) for e in crontab.entries]
    problems = check_specs([(e.line, spec) for e, spec in specs])
    if problems:
        _refuse(problems, as_json)
    if not as_json:
        for warning in crontab.warnings:
            hint(f"warning: line {warning.line}: {warning.message}")
    items = [_Item(e.line, spec, f"{e.cron} ({e.timezone})", _entry_extra(e)) for e, spec in specs]
    with client(url, token) as cw:
        rows = _apply(cw, items, dry_run)
    if as_json:
        warnings = [{"line": w.line, "warning": w.message} for w in crontab.warnings]
        out = {"dry_run": dry_run, "jobs": rows, "warnings": warnings}
        click.echo(json.dumps(out, indent=2))
        return
    print_table(rows, COLUMNS)
    shells = sorted({e.shell for e in crontab.entries})
    if shells:
        allow = " ".join(f"--allow-command {s}" for s in shells)
        hint(f"the workers of pool {pool!r} run these jobs only if started with {allow}")
    if as_user is not None and crontab.entries:
        hint(
            f"the lines say they run as {as_user!r}: the workers of pool {pool!r} run them"
            " as their own OS user, so start them as that user"
        )
    if dry_run:
        hint("dry run: nothing was written")


@import_.command("cronjob")
@remote_options
@click.argument("file", type=click.File("r"), metavar="FILE|-")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--pool", default="default", show_default=True, help="The jobs' pool.")
@click.option(
    "--tz",
    default="UTC",
    show_default=True,
    help="The zone of the CronJobs without spec.timeZone.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 7 * 86_400),
    default=3600,
    show_default=True,
    help="How long one run may take, in seconds, for CronJobs without activeDeadlineSeconds.",
)
def import_cronjob(
    url: str,
    token: str | None,
    as_json: bool,
    file: TextIO,
    dry_run: bool,
    pool: str,
    tz: str,
    timeout: float,
) -> None:
    """Make a job of each Kubernetes CronJob in FILE (YAML or JSON, several documents or
    a List, - for stdin): its container's command and args run on a worker, which must
    allow the program (--allow-command); the image is not used. Importing the same file
    again changes nothing; a changed CronJob updates its job (suspend pauses or resumes
    it); nothing is imported while any CronJob is invalid. Other kinds are skipped.
    """
    try:
        manifests = parse_cronjobs(_read(file), timezone=tz)
    except CrontabError as exc:
        _refuse(exc.problems, as_json, what="document")
        return
    specs = [(c, c.spec(pool=pool, timeout_seconds=timeout)) for c in manifests.cronjobs]
    problems = check_specs([(c.line, spec) for c, spec in specs])
    if problems:
        _refuse(problems, as_json, what="document")
    if not as_json:
        for warning in manifests.warnings:
            hint(f"warning: line {warning.line}: {warning.message}")
    items = [
        _Item(
            c.line,
            spec,
            f"{c.cron} ({c.timezone})",
            {"cronjob": c.k8s_name, "argv": c.argv, "paused": c.paused},
            c.paused,
        )
        for c, spec in specs
    ]
    with client(url, token) as cw:
        rows = _apply(cw, items, dry_run)
    if as_json:
        warnings = [{"line": w.line, "warning": w.message} for w in manifests.warnings]
        click.echo(json.dumps({"dry_run": dry_run, "jobs": rows, "warnings": warnings}, indent=2))
        return
    print_table(rows, COLUMNS)
    programs = sorted({c.argv[0] for c in manifests.cronjobs})
    if programs:
        allow = " ".join(f"--allow-command {p}" for p in programs)
        hint(f"the workers of pool {pool!r} run these jobs only if started with {allow}")
    if dry_run:
        hint("dry run: nothing was written")


_SYSTEM_FILES = ("/etc/crontab", "/etc/cron.d/")
"""Where system crontabs are (a copy such as /etc/crontab.orig is one too)."""


def _check_system(file: TextIO, system: bool, as_user: str | None) -> None:
    """A system crontab is said to be one, with its user: each line's sixth field would
    otherwise be read as the command's first word (``root /usr/bin/backup``)."""
    if system and as_user is None:
        fail(
            "--system needs --as-user USER: the OS user whose lines to import (the user"
            " the pool's workers run as; a worker runs every command as itself)",
            EXIT_INVALID,
        )
    if as_user is not None and not system:
        fail("--as-user is for a system crontab: add --system", EXIT_INVALID)
    if as_user is not None and not USER_NAME.match(as_user):
        fail(f"--as-user: {as_user!r} is not a user name (root, www-data)", EXIT_INVALID)
    name = str(getattr(file, "name", ""))
    if not system and name.startswith(_SYSTEM_FILES):
        fail(
            f"{name} is a system crontab (a user field after the five time fields):"
            " import it with --system --as-user USER",
            EXIT_INVALID,
        )


@dataclass(frozen=True)
class _Item:
    """One job an import wants: the line it comes from, its spec, how its schedule is
    shown, what else its row carries, and for a CronJob whether it is paused."""

    line: int
    spec: dict[str, Any]
    schedule: str
    extra: dict[str, Any]
    paused: bool | None = None


def _entry_extra(entry: Entry) -> dict[str, Any]:
    extra: dict[str, Any] = {"argv": entry.argv()}
    if entry.user is not None:
        extra["user"] = entry.user
    return extra


def _apply(cw: Client, items: list[_Item], dry_run: bool) -> list[dict[str, Any]]:
    """Create the jobs not there yet (one batch: all or none), update those whose
    fingerprint changed; a row per item saying which."""
    plan = [(item, _existing(cw, item.spec["name"])) for item in items]
    creates = [item.spec for item, job in plan if job is None]
    created = {} if dry_run or not creates else _create(cw, creates)
    rows = []
    for item, job in plan:
        name = item.spec["name"]
        row: dict[str, Any] = {"line": item.line, "name": name, "schedule": item.schedule}
        if job is None:
            made = created.get(name)
            result, job_id = ("create" if dry_run else "created"), (made.id if made else None)
            if made is not None and item.paused:
                cw.pause_job(made.id)
        elif _fingerprint(job) == item.spec["payload"]["fingerprint"]:
            result, job_id = "unchanged", job.id
        else:
            if not dry_run:
                changes = {k: v for k, v in item.spec.items() if k != "name"}
                updated = cw.update_job(job.id, job.version, **changes)
                _follow_pause(cw, updated, item.paused)
            result, job_id = ("update" if dry_run else "updated"), job.id
        row.update(result=result, job_id=job_id, **item.extra)
        rows.append(row)
    return rows


def _follow_pause(cw: Client, job: JobInfo, paused: bool | None) -> None:
    """A CronJob's ``suspend`` as the job's state: paused, or resumed (without catching
    up the occurrences it slept through, as Kubernetes does not)."""
    if paused is True and job.state == "active":
        cw.pause_job(job.id)
    elif paused is False and job.state == "paused":
        cw.resume_job(job.id)


def _create(cw: Client, creates: list[dict[str, Any]]) -> dict[str, JobInfo]:
    """All the new jobs in one batch: the API makes all of them or none."""
    return {job.name: job for job in cw.create_jobs(creates)}
