"""Where the console writes: a terminal gets colours and a live table of recent runs; a
pipe or a file gets plain lines, one per event, never wrapped and never blank."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Collection
from contextlib import AbstractContextManager, nullcontext
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from cronwheel.console.events import EventFeed
from cronwheel.console.lines import STYLE, one_line, render, stamp, state_label
from cronwheel.core.clock import Clock, SystemClock
from cronwheel.core.model import DEFAULT_TENANT, Run
from cronwheel.engine._aio import sleep_or_stop
from cronwheel.engine._outage import Outage
from cronwheel.store.base import Store

log = logging.getLogger("cronwheel.console")

POLL_SECONDS = 0.25
WAITING_EVERY = 8
"""Polls between two looks for jobs no worker serves (about every 2 s)."""


class Output:
    """The console's stream. A terminal (or ``terminal=True``) gets rich's colours; any
    other stream gets each line written as is: rich would wrap it at 80 columns."""

    def __init__(self, stream: TextIO | None = None, *, terminal: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.rich = Console(file=self.stream, force_terminal=self.terminal or None)
        self._live: Live | None = None

    def line(self, text: str, style: str | None = None) -> None:
        text = one_line(text)
        if not self.terminal:
            self.stream.write(text + "\n")
            self.stream.flush()
            return
        console = self._live.console if self._live is not None else self.rich
        console.print(Text(text, style=style or ""), soft_wrap=True)

    def live(self) -> AbstractContextManager[Live | None]:
        if not self.terminal:
            return nullcontext(None)
        self._live = Live(console=self.rich, refresh_per_second=4)
        return self._live


async def watch_runs(
    store: Store,
    stop: asyncio.Event,
    *,
    output: Output | None = None,
    own_pools: Collection[str] = (),
    own_worker: str | None = None,
    clock: Clock | None = None,
    rows: int = 15,
) -> None:
    """Report each event once, at its own time, until ``stop``; first, the newest events
    from before this start, marked as history."""
    output = output or Output()
    clock = clock or SystemClock()
    feed = EventFeed(store, clock, own_pools=own_pools)
    # A read that fails (the store restarting, a connection cut, a deadlock reported to
    # it) is reported and tried again: the console is one service of the process, and it
    # must not take the worker, the scheduler and the API down with it.
    outage = Outage(log, "following runs for the console")
    while True:
        try:
            history = await feed.start()
            break
        except Exception as exc:
            if stop.is_set():
                return
            await sleep_or_stop(stop, outage.failed(exc))
    outage.ok()
    started = feed.started_at or clock.now()
    if history:
        output.line(f"history (before this start, times UTC): the newest {len(history)} events")
        for event in history:
            text, style = render(event, own_worker=own_worker, history=True)
            output.line(text, STYLE.get(style))
    output.line(f"live from {stamp(started, with_date=True)} UTC (each event once, at its time)")
    polls = 0
    with output.live() as live:
        while True:
            stopping = stop.is_set()
            try:
                events = await feed.poll(check_waiting=polls % WAITING_EVERY == 0)
                polls += 1
                for event in events:
                    text, style = render(event, own_worker=own_worker)
                    output.line(text, STYLE.get(style))
                if live is not None:
                    recent = await store.list_runs(DEFAULT_TENANT, limit=rows)
                    live.update(await _table(feed, recent, clock))
            except Exception as exc:
                if stopping:
                    return
                await sleep_or_stop(stop, outage.failed(exc))
                continue
            outage.ok()
            if stopping:  # one last read after the stop: what happened up to it is shown
                return
            await sleep_or_stop(stop, POLL_SECONDS)


async def _table(feed: EventFeed, runs: list[Run], clock: Clock) -> Table:
    table = Table(title="cronwheel: recent runs (Ctrl-C to stop)", expand=False)
    for column in ("run", "job", "scheduled for (UTC)", "state", "attempt", "note"):
        table.add_column(column, overflow="fold")
    now = clock.now()
    for run in runs:
        label = state_label(run, now)
        word = label.split(",")[0].split(" ")[0]
        table.add_row(
            str(run.id),
            one_line(await feed.name_of(run)),
            stamp(run.scheduled_for),
            Text(label, style=STYLE.get(word, "")),
            f"{run.attempt}/{run.max_attempts}",
            one_line(run.last_error or run.reason or ""),
        )
    return table
