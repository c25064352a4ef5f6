"""bench/startup.py: how soon a freshly spawned ``cronwheel worker`` starts its first run.

The goal (issue 18): a worker claims its first runs within 250 ms of its process start.
Each sample fills a fresh store with due runs of a manual job, spawns ``cronwheel worker``
on it (a handler that writes the wall clock of its first start to a file), and measures
spawn → first handler start; then the worker is stopped. The figures (min, p50, max over
the samples, in ms) are printed, never asserted. Start-up includes the interpreter, the
imports, opening and checking the store, the clock probes and the first claim.

    python bench/startup.py --store sqlite --store pg --samples 10
    python bench/startup.py --quick --store sqlite --store pg        # CI: 2 samples
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import cronwheel
from cronwheel.control.service import connect

PG = os.environ.get("CRONWHEEL_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")

HANDLERS = """
import os, time
from cronwheel.actions.handler import HandlerRegistry

handlers = HandlerRegistry()
_seen = False


def first(ctx):
    global _seen
    if not _seen:
        _seen = True
        path = os.environ["STARTUP_OUT"]
        with open(path + ".tmp", "w") as f:
            f.write(repr(time.time()))
        os.replace(path + ".tmp", path)


handlers.register("first", first)
"""


async def _fill(url: str, runs: int) -> None:
    service = await connect(url)
    try:
        job = await service.create(
            name="startup", schedule={"kind": "manual"}, action={"type": "handler", "name": "first"}
        )
        await service.enqueue(job.id, [None] * runs)
    finally:
        await service.store.close()


def _sample(url: str, workdir: Path) -> float:
    asyncio.run(_fill(url, 100))
    out = workdir / f"first-{uuid.uuid4().hex}"
    env = {**os.environ, "STARTUP_OUT": str(out), "PYTHONPATH": str(workdir)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    command = [sys.executable, "-m", "cronwheel", "worker", "--db", url, "--app"]
    command += ["startup_handlers:handlers", "--log-level", "error"]
    spawned = time.time()
    worker = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = spawned + 60
        while not out.exists():
            if worker.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the worker started no run (exit {worker.poll()})")
            time.sleep(0.001)
        return float(out.read_text()) - spawned
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


async def _pg_database(action: str, name: str) -> None:
    conn = await asyncpg.connect(PG)
    try:
        if action == "create":
            await conn.execute(f'CREATE DATABASE "{name}"')
        else:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def measure(store: str, samples: int, workdir: Path) -> list[float]:
    found = []
    for i in range(samples):
        if store == "sqlite":
            found.append(_sample(f"sqlite:///{workdir}/startup-{i}.db", workdir))
            continue
        name = f"cwbench_startup_{os.getpid()}_{i}"
        asyncio.run(_pg_database("create", name))
        try:
            found.append(_sample(PG.rsplit("/", 1)[0] + f"/{name}", workdir))
        finally:
            asyncio.run(_pg_database("drop", name))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", action="append", choices=["sqlite", "pg"], required=True)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 samples (CI)")
    args = parser.parse_args()
    samples = 2 if args.quick else args.samples
    # As pip does when it installs the package: the samples time a start, not a compile.
    compileall.compile_dir(Path(cronwheel.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        (workdir / "startup_handlers.py").write_text(HANDLERS)
        print(f"spawn -> first handler start of cronwheel worker, {samples} samples")
        print(f"  {'store':8} {'min ms':>8} {'p50 ms':>8} {'max ms':>8}")
        for store in args.store:
            ms = [s * 1000 for s in measure(store, samples, workdir)]
            print(f"  {store:8} {min(ms):8.0f} {statistics.median(ms):8.0f} {max(ms):8.0f}")


if __name__ == "__main__":
    main()
