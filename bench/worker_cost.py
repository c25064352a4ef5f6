"""bench/worker_cost.py: the worker's own CPU per run, in one process.

``bench/cpu_budget.py`` counts the worker process from its spawn (start-up, imports, the
bench's handler that appends a line per run) next to PostgreSQL's share. This isolates
the worker's steady cost: N runs of one manual job are enqueued in a fresh database,
then one :class:`~cronwheel.Worker` (the CLI's default concurrency and process tuning,
an async no-op handler) drains them in this process, and the CPU this process used from
the worker's start to its last completion written (``time.process_time``, every thread)
is divided by N. ``--log-level info`` adds the attempt line per run that
``cronwheel worker`` writes by default (to /dev/null: the formatting and the write are
counted, not a terminal's); the default, warning, is what the bench's workers run at.

    python bench/worker_cost.py                       # 20,000 runs, 3 rounds
    python bench/worker_cost.py --log-level info --log-format json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import time

import asyncpg
import cronwheel
from cronwheel import RunContext
from cronwheel.cli.services import ASYNC_CONCURRENCY
from cronwheel.engine import eventloop
from cronwheel.engine.runtime import tune_process
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.observability.logs import configure

DEFAULT_PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


async def noop(ctx: RunContext) -> None:
    pass


async def once(admin_dsn: str, n: int, concurrency: int) -> tuple[float, float, float]:
    """(µs of CPU per run, of which the collector's, runs/s) for one drain of n runs."""
    name = f"cwbench_worker_cost_{os.getpid()}"
    admin = await asyncpg.connect(admin_dsn)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        cw = await cronwheel.connect(f"{admin_dsn.rpartition('/')[0]}/{name}")
        try:
            job = await cw.create(
                name="q", schedule={"kind": "manual"}, action={"type": "handler", "name": "noop"}
            )
            for i in range(0, n, 2000):
                await cw.enqueue(job.id, [f"k{k}" for k in range(i, min(n, i + 2000))])
            worker = Worker(cw.store, WorkerConfig(pools={"default": concurrency}))
            worker.handlers.register("noop", noop)
            return await _drain(worker, n)
        finally:
            await cw.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _drain(worker: Worker, n: int) -> tuple[float, float, float]:
    collecting = [0.0, 0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    stop = asyncio.Event()
    gc.collect()
    tune_process()
    gc.callbacks.append(timed)
    wall, cpu = time.perf_counter(), time.process_time()
    task = asyncio.create_task(worker.run(stop))
    try:
        while worker.completed < n:  # noqa: ASYNC110  # no event to await: poll the count
            await asyncio.sleep(0.005)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    finally:
        gc.callbacks.remove(timed)
        stop.set()
        await task
        gc.unfreeze()
    return cpu / n * 1e6, collecting[0] / n * 1e6, n / wall


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=ASYNC_CONCURRENCY)
    p.add_argument("--log-level", default="warning")
    p.add_argument("--log-format", default="text", choices=["text", "json"])
    p.add_argument("--pg", default=DEFAULT_PG, help="an admin DSN (or CWBENCH_PG_DSN)")
    a = p.parse_args()
    os.environ.setdefault("CRONWHEEL_WEBHOOK_SECRET", "bench")  # no warning line
    configure(a.log_format, a.log_level)
    # The lines' cost, not a terminal's: they go to /dev/null (errors still show).
    [handler] = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115  # for the process's life
    print(f"{'µs/run':>7} {'gc µs/run':>9} {'runs/s':>8}  ({a.runs:,} runs, log {a.log_level})")
    for _ in range(a.rounds):
        us, gc_us, rate = eventloop.run(once(a.pg, a.runs, a.concurrency))
        print(f"{us:>7.1f} {gc_us:>9.1f} {rate:>8,.0f}", flush=True)


if __name__ == "__main__":
    main()
