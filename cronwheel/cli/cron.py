"""``cronwheel cron``: inspect cron expressions without running anything."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click
from rich.console import Console
from rich.table import Table

from cronwheel.schedule import (
    DIALECTS,
    GAP_POLICIES,
    OVERLAP_POLICIES,
    CronExpression,
    Occurrence,
    load_zone,
    occurrences,
)

_NOTES = {
    "moved": "{wall} does not exist (DST gap): fires at the end of the gap",
    "shifted": "{wall} does not exist (DST gap): shifted by the jump",
    "merged": "{wall} occurs twice (DST overlap): fires the {which} time only",
    "repeated": "{wall} occurs twice (DST overlap): fires both times, this is the {which}",
}


@click.group("cron")
def cron() -> None:
    """Inspect cron expressions: see docs/cron.md for the semantics."""


@cron.command("next")
@click.argument("expression")
@click.option("--tz", default="UTC", show_default=True, help="IANA zone the job runs in.")
@click.option(
    "--from",
    "from_",
    metavar="ISO",
    help="Start after this instant (default: now); without an offset it is read in --tz.",
)
@click.option("--count", default=5, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--dialect", type=click.Choice(DIALECTS), default="standard", show_default=True)
@click.option("--dst-gap", type=click.Choice(GAP_POLICIES), default="gap_end", show_default=True)
@click.option(
    "--dst-overlap", type=click.Choice(OVERLAP_POLICIES), default="first", show_default=True
)
def next_command(
    expression: str,
    tz: str,
    from_: str | None,
    count: int,
    as_json: bool,
    dialect: str,
    dst_gap: str,
    dst_overlap: str,
) -> None:
    """Print the next fire times of EXPRESSION, with the DST adjustments marked."""
    try:
        expr = CronExpression.parse(expression, dialect)
        zone = load_zone(tz)
        start = _start(from_, tz)
        found = occurrences(expr, start, zone, count, dst_gap=dst_gap, dst_overlap=dst_overlap)
    except ValueError as exc:
        # Every engine error names its field: show it as a usage error (exit code 2).
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(json.dumps([_as_json(o) for o in found], indent=2))
    else:
        _print_table(expression, tz, found)


def _start(from_: str | None, tz: str) -> datetime:
    if from_ is None:
        return datetime.now(UTC)
    try:
        start = datetime.fromisoformat(from_)
    except ValueError:
        message = f"{from_!r} is not an ISO 8601 datetime"
        raise click.BadParameter(message, param_hint="--from") from None
    if start.tzinfo is None:
        start = start.replace(tzinfo=load_zone(tz))
    return start


def _note(occurrence: Occurrence) -> str:
    if occurrence.dst is None:
        return ""
    wall = occurrence.wall.time().isoformat()
    which = "second" if occurrence.at.fold else "first"  # zoneinfo sets fold on repeats
    return f"{occurrence.dst}: " + _NOTES[occurrence.dst].format(wall=wall, which=which)


def _as_json(occurrence: Occurrence) -> dict[str, str | None]:
    return {
        "at": occurrence.at.isoformat(),
        "utc": occurrence.utc.isoformat(),
        "wall": occurrence.wall.isoformat(),
        "dst": occurrence.dst,
    }


def _print_table(expression: str, tz: str, found: list[Occurrence]) -> None:
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # pipes and tests: never wrap a timestamp
    if not found:
        console.print(f"{expression!r} never fires after this start.")
        return
    table = Table(title=f"{expression}  ({tz})")
    for column in ("#", f"local ({tz})", "UTC", "DST"):
        table.add_column(column)
    for number, occurrence in enumerate(found, start=1):
        mark = "*" if occurrence.dst else ""
        table.add_row(
            str(number),
            occurrence.at.isoformat() + mark,
            occurrence.utc.isoformat(),
            _note(occurrence),
        )
    console.print(table)
