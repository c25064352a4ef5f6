"""bench/cpu_budget.py: where W1's CPU goes, per run, for each system.

W1's rate on this 2-core machine is bounded by the CPU a run costs, all processes
counted: the worker's, PostgreSQL's and the kernel's. This runs ``bench/run --workload
W1`` for each system while sampling /proc every 10 ms, and prints, for the time its
worker processes lived (spawn to stop: start-up included), the CPU seconds of

- the worker side: the processes the system's adapter started (``cronwheel worker``,
  pgqueuer's worker, ...), children included;
- PostgreSQL: every ``postgres`` process, backends that came and went included;
- the machine: all CPUs, from /proc/stat (2.0 per second when both cores are busy);

each also per run, next to W1's own figures. Nothing is asserted.

    python bench/cpu_budget.py --system cronwheel-pg --system pgqueuer --repeat 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    at: float
    machine_busy: int
    postgres: dict[int, int]
    procs: dict[int, tuple[int, int]]
    """pid -> (parent pid, CPU ticks) of every other process."""


@dataclass
class Sampler:
    samples: list[Sample] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    commands: dict[int, str] = field(default_factory=dict)

    def run(self) -> None:
        while not self.stop.is_set():
            sample = _snapshot()
            self.samples.append(sample)
            for pid in sample.procs.keys() - self.commands.keys():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        self.commands[pid] = f.read().replace(b"\0", b" ").decode()[:100]
                except OSError:
                    self.commands[pid] = "?"
            time.sleep(0.01)


def _snapshot() -> Sample:
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    busy = sum(cpu) - cpu[3] - cpu[4]  # all but idle and iowait
    postgres: dict[int, int] = {}
    procs: dict[int, tuple[int, int]] = {}
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        comm = stat[stat.find("(") + 1 : stat.rfind(")")]
        rest = stat[stat.rfind(")") + 2 :].split()
        ticks = int(rest[11]) + int(rest[12])
        if comm == "postgres":
            postgres[int(name)] = ticks
        else:
            procs[int(name)] = (int(rest[1]), ticks)
    return Sample(time.time(), busy, postgres, procs)


def _descendants(sample: Sample, root: int, depth: int) -> set[int]:
    """Processes at least ``depth`` generations below root."""
    found: set[int] = set()
    for pid in sample.procs:
        chain, p = 0, pid
        while p in sample.procs and p != root and chain < 20:
            p, chain = sample.procs[p][0], chain + 1
        if p == root and chain >= depth:
            found.add(pid)
    return found


@dataclass
class Budget:
    """One W1 run's figures, and the CPU each side used per run (µs)."""

    runs_per_s: int
    runs_per_s_incl_startup: int
    window_s: float
    worker_us: float
    postgres_us: float
    machine_us: float
    worker_processes: list[str]


def budget(system: str, runs: int | None) -> Budget:
    sampler = Sampler()
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    time.sleep(0.2)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "w1.json"
        cmd = [str(HERE / "run"), "--system", system, "--workload", "W1", "--json", str(out)]
        if runs is not None:
            cmd += ["--set", f"W1.n={runs}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, err = proc.communicate()
        time.sleep(0.1)
        sampler.stop.set()
        thread.join()
        if proc.returncode != 0:
            sys.exit(f"bench/run failed for {system}:\n{err.decode()[-2000:]}")
        w1 = json.loads(out.read_text())["results"][0]
    samples = sampler.samples
    # The worker side: processes two or more generations below bench/run (bench/run ->
    # the system's adapter -> its worker processes), for as long as they lived.
    sides = [_descendants(s, proc.pid, 2) for s in samples]
    alive = [i for i, side in enumerate(sides) if side]
    if not alive:
        sys.exit(f"{system}: no worker process was seen")
    # The last stretch with one alive: a set-up process before the enqueue (pgqueuer's
    # schema install) is not the worker.
    last = first = alive[-1]
    while first > 1 and sides[first - 1]:
        first -= 1
    seen = set().union(*sides[first : last + 1])
    commands = sorted({sampler.commands.get(pid, "?") for pid in seen})
    seconds = samples[last].at - samples[first - 1].at
    worker = _ticks_used(samples, first, last, lambda s, i: {p: s.procs[p][1] for p in sides[i]})
    postgres = _ticks_used(samples, first, last, lambda s, i: s.postgres)
    machine = (samples[last].machine_busy - samples[first - 1].machine_busy) / TICKS
    n = w1["n"]
    return Budget(
        runs_per_s=w1["runs_per_s"] or 0,
        runs_per_s_incl_startup=w1["runs_per_s_incl_startup"] or 0,
        window_s=round(seconds, 2),
        worker_us=round(worker / n * 1e6, 1),
        postgres_us=round(postgres / n * 1e6, 1),
        machine_us=round(machine / n * 1e6, 1),
        worker_processes=commands,
    )


def _ticks_used(
    samples: list[Sample], first: int, last: int, pick: Callable[[Sample, int], dict[int, int]]
) -> float:
    """CPU seconds used from sample first-1 to sample last by the processes pick names
    (one seen only after the start counts from zero; one that exited, to its last sample)."""
    base = pick(samples[first - 1], first - 1)
    latest: dict[int, int] = {}
    for i in range(first, last + 1):
        latest.update(pick(samples[i], i))
    return sum(t - base.get(pid, 0) for pid, t in latest.items()) / TICKS


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--system", action="append", default=[], help="as bench/run's, repeatable")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--verbose", action="store_true", help="name the worker-side processes")
    p.add_argument("--runs", type=int, help="W1's size (default: bench/run's)")
    a = p.parse_args()
    systems = a.system or ["cronwheel-pg", "pgqueuer"]
    head = (
        f"{'system':<16} {'runs/s':>8} {'incl.start':>10} {'window':>7} "
        f"{'worker µs/run':>13} {'postgres µs/run':>15} {'machine µs/run':>14}"
    )
    print(head)
    for _ in range(a.repeat):
        for system in systems:
            b = budget(system, a.runs)
            print(
                f"{system:<16} {b.runs_per_s:>8,} {b.runs_per_s_incl_startup:>10,} "
                f"{b.window_s:>6}s {b.worker_us:>13} {b.postgres_us:>15} {b.machine_us:>14}",
                flush=True,
            )
            if a.verbose:
                print("  worker side:", *b.worker_processes, sep="\n    ")


if __name__ == "__main__":
    main()
