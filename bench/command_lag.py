"""A command job's start lag, its process's spawn included, against a webhook job's (issue
30 item 4): N one-time jobs of each kind due at spread instants, served by one in-process
scheduler and worker, as ``cronwheel dev`` runs them.

Each command is ``/bin/sh -c 'date +%s.%N > FILE'``: the lag is the time the shell's
``date`` read, less the instant the run was due, so it holds the worker's spawn of the
supervisor and of the command (the shell's own start and ``date``'s fork, about a
millisecond, are part of it). Each webhook goes to a loopback receiver that notes
``time.time()`` when the request's head arrives. One clock: everything is on this machine.

    python bench/command_lag.py                  # 100 of each, 50 ms apart, SQLite
    python bench/command_lag.py --store pg --runs 200

Figures are printed, never asserted: tests/engine/test_commands.py checks correctness.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import cronwheel
from cronwheel.engine.scheduler import Scheduler
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.security.egress import LOOPBACK

PG = os.environ.get("CWBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@contextlib.asynccontextmanager
async def store_url(store: str, folder: Path) -> AsyncIterator[str]:
    if store == "sqlite":
        yield f"sqlite:///{folder / 'bench.db'}"
        return
    name = f"cwbench_cmdlag_{os.getpid()}"
    admin = await asyncpg.connect(PG)
    await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield PG.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.close()


async def receiver(arrived: dict[str, float]) -> tuple[asyncio.Server, int]:
    """A loopback HTTP server answering 200 at once, noting when each path's head came."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                at = time.time()
                path = line.split()[1].decode()
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                arrived[path] = at
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def percentiles(lags: list[float]) -> str:
    ms = sorted(x * 1000 for x in lags)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"{statistics.median(ms):.1f} / {p99:.1f} / {ms[-1]:.1f}"


async def measure(store: str, runs: int, spacing: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        marks = folder / "marks"
        marks.mkdir()
        arrived: dict[str, float] = {}
        server, port = await receiver(arrived)
        async with store_url(store, folder) as url, await cronwheel.connect(url) as cw:
            first = datetime.now(UTC) + timedelta(seconds=3)
            due: dict[str, datetime] = {}
            specs = []
            for i in range(runs):
                for kind in ("command", "webhook"):
                    # The two kinds alternate, half a spacing apart, so neither waits on
                    # the other's runs.
                    at = first + timedelta(seconds=(2 * i + (kind == "webhook")) * spacing / 2)
                    key = f"{kind}-{i}"
                    due[key] = at
                    action = (
                        {
                            "type": "command",
                            "argv": ["/bin/sh", "-c", f"date +%s.%N > {marks / key}"],
                        }
                        if kind == "command"
                        else {"type": "webhook", "url": f"http://127.0.0.1:{port}/{key}"}
                    )
                    specs.append(
                        {"name": key, "schedule": {"kind": "once", "at": at.isoformat()}}
                        | {"action": action}
                    )
            await cw.create_many(specs)
            config = WorkerConfig(
                pools={"default": 100}, allow_commands=("/bin/sh",), webhook_allow=LOOPBACK
            )
            stop = asyncio.Event()
            tasks = [
                asyncio.create_task(Scheduler(cw.store).run(stop)),
                asyncio.create_task(
                    Worker(cw.store, config, webhook_secret=b"bench-secret").run(stop)
                ),
            ]
            last = max(due.values()) + timedelta(seconds=10)
            while datetime.now(UTC) < last:
                done = len(arrived) + len(list(marks.iterdir()))
                if done == 2 * runs:
                    break
                await asyncio.sleep(0.1)  # a poll of files the commands write
            stop.set()
            await asyncio.gather(*tasks)
        server.close()
        command = [
            float((marks / k).read_text()) - due[k].timestamp()
            for k in due
            if k.startswith("command") and (marks / k).exists()
        ]
        webhook = [at - due[path[1:]].timestamp() for path, at in arrived.items()]
        print(f"| {store} | command | {len(command)} of {runs} | {percentiles(command)} |")
        print(f"| {store} | webhook | {len(webhook)} of {runs} | {percentiles(webhook)} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "pg"), action="append")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--spacing", type=float, default=0.05, help="seconds between runs")
    args = parser.parse_args()
    print("| store | action | started | start lag p50 / p99 / max, ms |")
    print("|---|---|---:|---:|")
    for store in args.store or ["sqlite"]:
        await measure(store, args.runs, args.spacing)


if __name__ == "__main__":
    asyncio.run(main())
