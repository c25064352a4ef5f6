"""A webhook receiver as real ones are: it answers after a latency and serves a limited
number of connections at once (the others wait, as in a full accept backlog). It runs as
its own process (``python -m tests.e2e.receiver``), so that its work does not share the
event loop or the GIL of whatever it measures, and logs one line per request:
``arrival tenant run_id fence attempt`` (arrival in seconds since the epoch).

Used by the burst tests (issue 26) and by bench/webhooks.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys
import time
from pathlib import Path
from typing import TextIO


class Receiver:
    def __init__(
        self, latency: tuple[float, float], connections: int, out: TextIO, seed: int = 7
    ) -> None:
        self.latency = latency
        self.slots = asyncio.Semaphore(connections)
        self.out = out
        self.rng = random.Random(seed)
        self.lines: list[str] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with self.slots:
            try:
                while await self._one(reader, writer):
                    pass
            except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
                pass
            finally:
                writer.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        arrival = time.time()
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if length:
            await reader.readexactly(length)
        low, high = self.latency
        await asyncio.sleep(self.rng.uniform(low, high))
        self.lines.append(
            f"{arrival:.6f} {headers.get('cronwheel-tenant-id', '-')}"
            f" {headers.get('cronwheel-run-id', '-')} {headers.get('cronwheel-fence', '-')}"
            f" {headers.get('cronwheel-attempt', '-')}\n"
        )
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return headers.get("connection", "").lower() != "close"

    async def flush_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.flush()

    def flush(self) -> None:
        if self.lines:
            self.out.write("".join(self.lines))
            self.out.flush()
            self.lines.clear()


async def main(args: argparse.Namespace, out: TextIO) -> None:
    receiver = Receiver((args.latency_min, args.latency_max), args.connections, out)
    server = await asyncio.start_server(
        receiver.serve, "127.0.0.1", args.port, backlog=4096, limit=1 << 20
    )
    port = server.sockets[0].getsockname()[1]
    # Written whole at once (a reader polls for it): a temporary file renamed into place.
    await asyncio.to_thread(_publish, Path(args.port_file), str(port))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    flusher = asyncio.create_task(receiver.flush_every(0.1))
    async with server:
        await stop.wait()
    flusher.cancel()
    receiver.flush()


def _publish(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True, help="where the bound port is written")
    parser.add_argument("--log", required=True)
    parser.add_argument("--latency-min", type=float, default=0.02)
    parser.add_argument("--latency-max", type=float, default=0.2)
    parser.add_argument("--connections", type=int, default=100)
    arguments = parser.parse_args()
    with open(arguments.log, "a") as log:
        try:
            asyncio.run(main(arguments, log))
        except KeyboardInterrupt:
            sys.exit(0)
