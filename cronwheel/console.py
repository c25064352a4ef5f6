"""The terminal view of ``cronwheel dev``: recent runs, refreshed live (rich)."""

from __future__ import annotations

import asyncio
from datetime import datetime

from rich.console import Console
from rich.live import Live
from rich.table import Table

from cronwheel._aio import sleep_or_stop
from cronwheel.model import DEFAULT_TENANT, Job, Run
from cronwheel.store.base import Store

_STYLE = {
    "succeeded": "green",
    "dead": "bold red",
    "running": "yellow",
    "pending": "cyan",
    "cancelled": "magenta",
    "skipped": "dim",
}


def runs_table(runs: list[Run], jobs: dict[str, Job]) -> Table:
    table = Table(title="cronwheel: recent runs (Ctrl-C to stop)", expand=False)
    for column in ("run", "job", "scheduled for (UTC)", "state", "attempt", "note"):
        table.add_column(column)
    for run in runs:
        job = jobs.get(run.job_id)
        state = run.state.value
        table.add_row(
            str(run.id),
            job.name if job else run.job_id[:8],
            run.scheduled_for.strftime("%H:%M:%S.%f")[:-3],
            f"[{_STYLE.get(state, '')}]{state}[/]",
            f"{run.attempt}/{run.max_attempts}",
            (run.last_error or run.reason or "")[:60],
        )
    return table


async def watch_runs(
    store: Store, stop: asyncio.Event, *, console: Console | None = None, rows: int = 15
) -> None:
    """Show the newest runs until ``stop``; on a non-terminal, print each change once."""
    console = console or Console()
    jobs: dict[str, Job] = {}
    if not console.is_terminal:
        await _log_changes(store, stop, console, jobs)
        return
    with Live(console=console, refresh_per_second=4) as live:
        while not stop.is_set():
            runs = await _recent(store, jobs, rows)
            live.update(runs_table(runs, jobs))
            await sleep_or_stop(stop, 0.25)


async def _recent(store: Store, jobs: dict[str, Job], rows: int) -> list[Run]:
    runs = await store.list_runs(DEFAULT_TENANT, limit=rows)
    for run in runs:
        if run.job_id not in jobs:
            job = await store.get_job(DEFAULT_TENANT, run.job_id)
            if job is not None:
                jobs[run.job_id] = job
    return runs


async def _log_changes(
    store: Store, stop: asyncio.Event, console: Console, jobs: dict[str, Job]
) -> None:
    seen: dict[int, tuple[str, int]] = {}
    while not stop.is_set():
        for run in reversed(await _recent(store, jobs, 50)):
            key = (run.state.value, run.attempt)
            if seen.get(run.id) != key:
                seen[run.id] = key
                name = jobs[run.job_id].name if run.job_id in jobs else run.job_id
                note = f" — {run.last_error}" if run.last_error else ""
                stamp = datetime.now().strftime("%H:%M:%S")
                console.print(
                    f"{stamp} run {run.id} {name} {run.state.value} (attempt {run.attempt}){note}"
                )
        await sleep_or_stop(stop, 0.25)
