"""bench/startup_steps.py: where a freshly spawned ``cronwheel worker`` spends the time
before its first run, step by step (issue 28, "W1 from the spawn").

``bench/startup.py`` times spawn → first handler start as a whole; this spawns the same
worker (PostgreSQL, a fresh database holding due runs of one manual job) through a small
wrapper that writes, in ms since the spawn, when the interpreter is up, when the CLI, the
worker command's module and the PostgreSQL store's module are imported, and when the
store is opened, migrated, the clock probed, the worker registered, the pools' rates read
and the first claims made, then when the first handler starts. The wrapper patches those
functions in the child process only (it times them; it changes nothing they do). With
several builds (``--python``, each a virtualenv's interpreter with cronwheel installed),
the samples alternate build by build; the medians are printed, never asserted.

    python bench/startup_steps.py --samples 8 --python /path/to/main/.venv/bin/python \\
        --python .venv/bin/python
    python bench/startup_steps.py --runs 20000 --handler async    # W1's backlog and slots
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

import startup
from lib.proc import compile_cronwheel

WRAPPER = """
import os, sys, time
SPAWNED, OUT = float(os.environ["STEPS_SPAWNED"]), os.environ["STEPS_OUT"]
marks = []


def mark(name):
    marks.append(f"{(time.time() - SPAWNED) * 1000:.1f} {name}")
    with open(OUT, "w") as f:
        f.write("\\n".join(marks) + "\\n")


mark("interpreter up")
import cronwheel.cli
mark("cronwheel.cli imported")
import cronwheel.cli.services as services
mark("the worker command's module imported")
import cronwheel.store.postgres.store as pg
mark("the PostgreSQL store's module imported")
import cronwheel.engine.worker as engine


def timed(owner, name, label):
    inner = getattr(owner, name)

    async def step(*args, **kwargs):
        mark(label + " begins")
        try:
            return await inner(*args, **kwargs)
        finally:
            mark(label + " ends")

    setattr(owner, name, step)


timed(services, "open_store", "opening the store")
timed(pg.PostgresStore, "migrate", "migrating")
timed(engine.Worker, "sync_clock", "probing the clock")
timed(pg.PostgresStore, "register_worker", "registering")
timed(pg.PostgresStore, "pool_rates", "reading the pools' rates")
timed(pg.PostgresStore, "claim_runs", "a claim")
sys.argv = ["cronwheel", *sys.argv[1:]]
cronwheel.cli.main()
"""

HANDLERS = """
import sys
from cronwheel.actions.handler import HandlerRegistry

sync_handlers, async_handlers = HandlerRegistry(), HandlerRegistry()
_seen = False


def first(ctx):
    global _seen
    if not _seen:
        _seen = True
        sys.modules["__main__"].mark("the first handler starts")


async def first_async(ctx):
    first(ctx)


sync_handlers.register("first", first)
async_handlers.register("first", first_async)
"""


def _sample(python: str, url: str, workdir: Path, runs: int, handler: str) -> list[str]:
    asyncio.run(startup._fill(url, runs))
    out = workdir / f"steps-{uuid.uuid4().hex}"
    env = {**os.environ, "STEPS_OUT": str(out), "PYTHONPATH": str(workdir)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    command = [python, str(workdir / "steps_wrapper.py"), "worker", "--db", url]
    command += ["--app", f"steps_handlers:{handler}_handlers", "--log-level", "error"]
    env["STEPS_SPAWNED"] = repr(time.time())
    worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while not (out.exists() and "the first handler starts" in out.read_text()):
            if worker.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the worker started no run (exit {worker.poll()})")
            time.sleep(0.002)
        time.sleep(0.1)  # the steps just after the first start (a second claim)
        return out.read_text().splitlines()
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="a build's interpreter (repeatable)")
    parser.add_argument("--samples", type=int, default=8, help="per build")
    parser.add_argument("--runs", type=int, default=100, help="due runs in the store")
    parser.add_argument(
        "--handler",
        choices=["sync", "async"],
        default="sync",
        help="sync: 32 slots (bench/startup.py's); async: 2,500 (W1's)",
    )
    args = parser.parse_args()
    builds = args.python or [sys.executable]
    for python in builds:
        compile_cronwheel(python)
    steps: dict[str, dict[str, list[float]]] = {b: defaultdict(list) for b in builds}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "steps_wrapper.py").write_text(WRAPPER)
        (workdir / "steps_handlers.py").write_text(HANDLERS)
        for i in range(args.samples):
            for python in builds if i % 2 == 0 else builds[::-1]:
                name = f"cwbench_steps_{os.getpid()}_{i}_{builds.index(python)}"
                asyncio.run(startup._pg_database("create", name))
                try:
                    url = startup.PG.rsplit("/", 1)[0] + f"/{name}"
                    lines = _sample(python, url, workdir, args.runs, args.handler)
                finally:
                    asyncio.run(startup._pg_database("drop", name))
                seen: set[str] = set()
                for line in lines:
                    ms, step = line.split(" ", 1)
                    if step in seen:
                        step += " (again)"
                    seen.add(step)
                    steps[python][step].append(float(ms))
    first = steps[builds[0]]
    order = sorted(first, key=lambda s: statistics.median(first[s]))
    print(f"ms from the spawn (median of {args.samples}), {args.runs} due runs, {args.handler}")
    for n, python in enumerate(builds):
        print(f"  build {n + 1}: {python}")
    print(f"  {'step':48}" + "".join(f"{f'build {n + 1}':>10}" for n in range(len(builds))))
    for step in order:
        cells = [steps[b].get(step) for b in builds]
        shown = "".join(f"{statistics.median(c):10.1f}" if c else f"{'-':>10}" for c in cells)
        print(f"  {step:48}{shown}")


if __name__ == "__main__":
    main()
