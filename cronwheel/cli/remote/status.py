"""``cronwheel status``: is it healthy? ``GET /v1/status`` on one screen.

On a terminal: a summary line, the problems, then tables of pools, workers and
schedulers (ids and times never cut; numbers made readable: ``30 s``, ``12 ms``);
``--watch`` redraws it in place. In a pipe: the same sections as tab-separated tables
(a header line each, raw numbers in seconds, an empty line between sections); ``--watch``
prints one such snapshot per refresh. ``--json``: the API's answer as it is.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import click
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from cronwheel.cli.remote._base import client, tenant_option, token_option, url_option
from cronwheel.cli.tables import Column, is_terminal, rich_table, tsv_lines
from cronwheel.core.text import escape_controls
from cronwheel.sdk import Client

EXIT_STORE_DOWN = 6


def seconds(value: Any) -> str:
    """A duration a person reads at a glance: ``850 µs``, ``12 ms``, ``3.4 s``, ``5 min``."""
    if value is None:
        return ""
    s = float(value)
    if s < 0.001:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _human(key: str) -> Any:
    return lambda row: seconds(row.get(key))


POOL_COLUMNS = (
    Column("pool", kind="text"),
    Column("due"),
    Column(
        "held", rank=2, value=lambda row: row.get("held_by_key", 0) + row.get("held_by_overlap", 0)
    ),
    Column("running"),
    Column(
        "oldest_due_age_seconds",
        header="oldest due",
        rank=1,
        value=_human("oldest_due_age_seconds"),
    ),
    Column("lag_p50_seconds", header="lag p50", rank=2, value=_human("lag_p50_seconds")),
    Column("lag_p99_seconds", header="lag p99", rank=2, value=_human("lag_p99_seconds")),
    Column("throughput_per_minute", header="per min", rank=3),
    Column("failures", header="failed", rank=1),
    Column("dead", rank=1),
    Column("workers", rank=1),
)
"""On a terminal. In a pipe every column is the API's field, raw (seconds as numbers)."""
WORKER_COLUMNS = (
    Column("id", kind="id"),
    Column("pools", kind="text", value=lambda row: ",".join(row.get("pools") or ())),
    Column("shared", rank=2),
    Column("capacity", rank=1),
    Column("in_flight", header="in flight", rank=1),
    Column("tenant_id", header="tenant", kind="id", rank=3),
    Column("host", kind="text", rank=4),
    Column("last_seen_at", header="last seen", kind="time", rank=5),
)
SCHEDULER_COLUMNS = (
    Column("id", kind="id", value=lambda row: row.get("id") or "(shared)"),
    Column("shards_owned", header="shards"),
    Column("last_seen_at", header="last seen", kind="time", rank=1),
)


def _raw(columns: Sequence[Column]) -> list[Column]:
    """The pipe's columns: the API's fields, whole and raw, under their own names."""
    raw = []
    for column in columns:
        if column.key == "held":  # on a terminal, the sum of the API's two fields
            raw += [Column("held_by_key"), Column("held_by_overlap")]
            continue
        keep_value = column.key in ("pools", "id")
        raw.append(Column(column.key, kind=column.kind, value=column.value if keep_value else None))
    return raw


def summary(report: Mapping[str, Any]) -> list[str]:
    """Two lines: healthy or not, the version and the scope; the store's answer and the
    time of the report (whole)."""
    store = report["store"]
    if store["reachable"]:
        answered = f"store answered in {seconds(store['answered_in_ms'] / 1000)}"
        answered += f" (schema {store['schema_version']})"
    else:
        answered = f"store UNREACHABLE ({store['error']})"
    replication = report.get("replication")
    if replication is not None:
        answered += f" · replication: {replication_text(replication)}"
    scope = "every tenant" if report["scope"] == "system" else f"tenant {report['tenant_id']}"
    health = "healthy" if report["healthy"] else "NOT HEALTHY"
    return [
        f"{health} · cronwheel {report['version']} · {scope} · last {report['window_minutes']} min",
        f"{answered} · at {report['now']}",
    ]


REPLICATION_WORDS = {
    "synchronous": "synchronous",
    "asynchronous": "asynchronous (a failover loses the last commits)",
    "none": "none (no standby)",
    "waiting": "WAITING for a synchronous standby",
}


def replication_text(replication: Mapping[str, Any]) -> str:
    """``synchronous (1 standby, synchronous_commit=on)``, ``none (no standby)``…"""
    mode = str(replication["mode"])
    text = REPLICATION_WORDS.get(mode, mode)
    n = replication.get("standbys") or 0
    if n:
        text += f" ({n} standby{'s' if n > 1 else ''}"
        if replication.get("synchronous_commit"):
            text += f", synchronous_commit={replication['synchronous_commit']}"
        text += ")"
    return text


def fleet_line(report: Mapping[str, Any]) -> str:
    shards = report["shards"]
    maintenance = report["maintenance"]
    if maintenance["active"]:
        owner = maintenance["owner"] or "a shared process"
        keeper = f"maintenance by {owner} (lease until {maintenance['expires_at']})"
    else:
        keeper = "no maintenance owner"
    return f"shards owned: {shards['owned']} of {shards['total']} · {keeper}"


def render(report: Mapping[str, Any], width: int) -> RenderableType:
    """The terminal screen of one report."""
    first, second = summary(report)
    parts: list[RenderableType] = [_text(first, "bold"), _text(second)]
    parts += [_text(f"problem: {p}", "red") for p in report["problems"]]
    parts += [_text(f"note: {n}") for n in report.get("notes", ())]
    for title, rows, columns in _sections(report):
        parts.append(Text(""))
        parts.append(Text(title, style="bold underline"))
        if rows:
            parts.append(rich_table(rows, columns, width))
        else:
            parts.append(Text(f"(no {title})"))
    parts += [Text(""), _text(fleet_line(report))]
    return Group(*parts)


def _text(line: str, style: str = "") -> Text:
    """A line of the screen: what it carries from the server (a store's error, a
    tenant's id) escaped as every line the CLI shows is (cronwheel.cli._logs.say)."""
    return Text(escape_controls(line), style=style)


def _sections(report: Mapping[str, Any]) -> list[tuple[str, list[Any], tuple[Column, ...]]]:
    return [
        ("pools", report["pools"], POOL_COLUMNS),
        ("workers", report["workers"], WORKER_COLUMNS),
        ("schedulers", report["schedulers"], SCHEDULER_COLUMNS),
    ]


def plain_lines(report: Mapping[str, Any]) -> list[str]:
    """The pipe's form of one report: tab-separated sections, an empty line between."""
    store, shards, maintenance = report["store"], report["shards"], report["maintenance"]
    head = {
        "now": report["now"],
        "healthy": report["healthy"],
        "version": report["version"],
        "scope": report["scope"],
        "tenant": report["tenant_id"],
        "window_minutes": report["window_minutes"],
        "store_reachable": store["reachable"],
        "store_answered_in_ms": store["answered_in_ms"],
        "store_error": store["error"],
        "replication": (report.get("replication") or {}).get("mode"),
        "shards_owned": shards["owned"],
        "shards_total": shards["total"],
        "maintenance_owner": maintenance["owner"] if maintenance["active"] else None,
        "overdue_jobs": report.get("overdue_jobs"),
    }
    lines = _tsv([head], [Column(key) for key in head])
    if report["problems"]:
        lines += ["", *_tsv([{"problem": p} for p in report["problems"]], [Column("problem")])]
    if report.get("notes"):
        lines += ["", *_tsv([{"note": n} for n in report["notes"]], [Column("note")])]
    for _, rows, columns in _sections(report):
        lines += ["", *_tsv(rows, _raw(columns))]
    return lines


def _tsv(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> list[str]:
    return tsv_lines(columns, [[column.cell(row) for column in columns] for row in rows])


@click.command("status")
@url_option
@token_option
@tenant_option
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
@click.option(
    "--window",
    type=click.IntRange(1, 60),
    default=5,
    show_default=True,
    help="Minutes of finished attempts that lag, throughput and failures cover.",
)
@click.option("--watch", is_flag=True, help="Refresh until interrupted (or --count times).")
@click.option(
    "--interval",
    type=click.FloatRange(0, 3600),
    default=2.0,
    show_default=True,
    help="Seconds between refreshes with --watch.",
)
@click.option(
    "--count",
    type=click.IntRange(1),
    default=None,
    help="With --watch: stop after this many reports.",
)
def status(
    url: str,
    token: str | None,
    as_json: bool,
    window: int,
    watch: bool,
    interval: float,
    count: int | None,
) -> None:
    """Is it healthy? Per pool: due, running, oldest due, start lag p50/p99, throughput,
    failures, dead letter; live workers; schedulers and shards; the maintenance owner;
    the store's answer. Exit 6 if the store does not answer (without --watch)."""
    with client(url, token) as cw:
        if not watch:
            report = cw.status(window=window)
            _show(report, as_json)
            if not report["store"]["reachable"]:
                sys.exit(EXIT_STORE_DOWN)
            return
        try:
            if is_terminal() and not as_json:
                _watch_live(cw, window, interval, count)
            else:
                _watch_plain(cw, window, interval, count, as_json)
        except KeyboardInterrupt:
            return


def _show(report: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
    elif is_terminal():
        console = Console()
        console.print(render(report, console.width), crop=False)
    else:
        for line in plain_lines(report):
            click.echo(line)


def _watch_plain(
    cw: Client, window: int, interval: float, count: int | None, as_json: bool
) -> None:
    shown = 0
    while count is None or shown < count:
        if shown:
            time.sleep(interval)
            if not as_json:
                click.echo("")  # between snapshots; each starts with its header line
        report = cw.status(window=window)
        if as_json:
            click.echo(json.dumps(report))  # one line per report: JSON Lines
        else:
            for line in plain_lines(report):
                click.echo(line)
        sys.stdout.flush()
        shown += 1


def _watch_live(cw: Client, window: int, interval: float, count: int | None) -> None:
    console = Console()
    shown = 0
    with Live(console=console, auto_refresh=False) as live:
        while count is None or shown < count:
            if shown:
                time.sleep(interval)
            live.update(render(cw.status(window=window), console.width), refresh=True)
            shown += 1
