"""The workloads, written once: every system runs the same steps and the same checks.

An adapter supplies a :class:`System` (how to enqueue a run due at an instant, which
processes execute and schedule); a flow enqueues, starts or reuses those processes,
waits for the handler's own records and counts lost and duplicated executions from them.
Start lag is always ``handler's wall clock at start - the run's intended instant``.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lib import proc, records
from lib.stats import lag_summary

Item = tuple[str, float | None]
"""A run to enqueue: its key and the epoch instant it is due (None: now)."""


@dataclass
class System:
    enqueue: Callable[[list[Item]], None]
    """Enqueue every item, as fast as the system's documented bulk path allows."""
    processes: Callable[[str], list[list[str]]]
    """The commands that execute (and, if the system needs one, schedule) a workload."""
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    """The settings used, reported with the figures."""
    ready_timeout: float = 60.0


class _Running:
    """The processes of one workload, and the profilers attached to them if asked."""

    def __init__(self, system: System, workload: str, rec: Path) -> None:
        self.log = system.workdir / f"{workload}.log"
        env = proc.bench_env(rec, system.env)
        self.procs = [proc.spawn(cmd, env, self.log) for cmd in system.processes(workload)]
        self.profilers = proc.profile(self.procs, system.workdir.name, self.log)

    def check(self) -> None:
        proc.check_alive(self.procs, self.log)

    def stop(self) -> None:
        proc.stop(self.procs)
        proc.wait_profilers(self.profilers)


def _probe(system: System, rec: Path, running: _Running) -> None:
    """Wait until the processes execute a run: 'workers already running' means serving."""
    system.enqueue([("probe", None)])
    deadline = time.time() + system.ready_timeout
    while records.count(rec) < 1:
        running.check()
        if time.time() > deadline:
            raise RuntimeError(f"no probe run executed within {system.ready_timeout} s")
        time.sleep(0.05)


def _tally(execs: Sequence[records.Execution], keys: set[str]) -> dict[str, int]:
    counts = Counter(e.key for e in execs if e.key in keys)
    return {
        "executed": sum(counts.values()),
        "lost": len(keys) - len(counts),
        "duplicated": sum(c - 1 for c in counts.values()),
    }


def _first_starts(execs: Sequence[records.Execution], keys: set[str]) -> dict[str, float]:
    first: dict[str, float] = {}
    for e in execs:
        if e.key in keys and (e.key not in first or e.started < first[e.key]):
            first[e.key] = e.started
    return first


def throughput(system: System, n: int) -> dict[str, Any]:
    """W1: n immediate runs queued, then one worker process started."""
    rec = system.workdir / "W1.records"
    keys = [f"w1-{i:06d}" for i in range(n)]
    t0 = time.perf_counter()
    system.enqueue([(k, None) for k in keys])
    enqueue_s = time.perf_counter() - t0
    spawned_at = time.time()
    running = _Running(system, "W1", rec)
    try:
        records.wait_for(rec, n, stall=30.0, deadline=spawned_at + 60 + n / 50)
        running.check()
    finally:
        running.stop()
    execs = records.read(rec)
    tally = _tally(execs, set(keys))
    starts = sorted(_first_starts(execs, set(keys)).values())
    busy = starts[-1] - starts[0] if len(starts) > 1 else math.nan
    wall = starts[-1] - spawned_at if starts else math.nan
    return {
        "n": n,
        "enqueue_s": round(enqueue_s, 3),
        "enqueue_per_s": round(n / enqueue_s),
        "runs_per_s": round(len(starts) / busy) if busy > 0 else None,
        # Counted from the worker's spawn, as a user who starts a worker on a backlog sees
        # it: start-up (imports, connecting, the first claim) included.
        "first_start_s": round(starts[0] - spawned_at, 3) if starts else None,
        "runs_per_s_incl_startup": round(len(starts) / wall) if wall > 0 else None,
        "wall_s_incl_startup": round(wall, 3) if starts else None,
        **tally,
    }


def at_instants(system: System, workload: str, items: list[Item], lead: float) -> dict[str, Any]:
    """W2 and W3: processes already serving, then runs due at the given instants (offsets
    from a start ``lead`` seconds ahead, fixed before the enqueue begins)."""
    rec = system.workdir / f"{workload}.records"
    running = _Running(system, workload, rec)
    try:
        _probe(system, rec, running)
        base = time.time() + lead
        planned: list[Item] = [(k, base + (offset or 0.0)) for k, offset in items]
        t0 = time.perf_counter()
        system.enqueue(planned)
        enqueue_s = time.perf_counter() - t0
        enqueued_at = time.time()
        last_due = max(at for _, at in planned if at is not None)
        records.wait_for(rec, len(items) + 1, stall=30.0, deadline=last_due + 120)
        running.check()
    finally:
        running.stop()
    intended = {k: at for k, at in planned if at is not None}  # every planned run has one
    execs = records.read(rec)
    first = _first_starts(execs, set(intended))
    lags = [started - intended[k] for k, started in first.items()]
    result = {
        "n": len(items),
        "enqueue_s": round(enqueue_s, 3),
        "enqueue_done_before_first_due": enqueued_at < base,
        "lag": lag_summary(lags),
        **_tally(execs, set(intended)),
    }
    if first:
        result["last_start_after_first_due_ms"] = round((max(first.values()) - base) * 1000, 1)
    return result


def cron(system: System, jobs: list[str], seconds: int, settle: float = 5.0) -> dict[str, Any]:
    """W4: cron jobs firing every second; measured over a window of whole seconds that
    opens once the first occurrence ran (every system had time to start)."""
    rec = system.workdir / "W4.records"
    running = _Running(system, "W4", rec)
    try:
        deadline = time.time() + system.ready_timeout
        while records.count(rec) < 1:
            running.check()
            if time.time() > deadline:
                raise RuntimeError("no cron occurrence executed: the system did not start")
            time.sleep(0.05)
        opens = math.ceil(time.time()) + 1
        closes = opens + seconds
        while time.time() < closes + settle:
            running.check()
            time.sleep(0.2)
    finally:
        running.stop()
    expected = {(j, s) for j in jobs for s in range(opens, closes)}
    counts: Counter[tuple[str, int]] = Counter()
    lags: dict[tuple[str, int], float] = {}
    for e in records.read(rec):
        if e.intended is None:
            raise RuntimeError("a cron execution did not record its scheduled instant")
        occurrence = (e.key, round(e.intended))
        if occurrence in expected:
            counts[occurrence] += 1
            lag = e.started - e.intended
            lags[occurrence] = min(lag, lags.get(occurrence, lag))
    return {
        "jobs": len(jobs),
        "seconds": seconds,
        "expected": len(expected),
        "executed": sum(counts.values()),
        "missed": len(expected) - len(counts),
        "duplicated": sum(c - 1 for c in counts.values()),
        "lag": lag_summary(list(lags.values())),
    }


def w2_items(n: int) -> list[Item]:
    return [(f"w2-{i:06d}", 0.0) for i in range(n)]


def w3_items(n: int, span: float) -> list[Item]:
    return [(f"w3-{i:06d}", i * span / n) for i in range(n)]
