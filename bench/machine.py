"""What the figures were measured on: reported with every result file and table."""

from __future__ import annotations

import asyncio
import os
import platform
import socket
import subprocess
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg


def describe(pg_dsn: str, redis_url: str) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "postgresql": _pg_version(pg_dsn),
        "redis": redis_info(redis_url, "redis_version"),
        "kernel": platform.release(),
        "cronwheel_commit": _commit(),
    }


def _commit() -> str | None:
    """The commit measured, marked dirty when the tree had changes (others' work too)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(
            ["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--", "..", ":!bench"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return f"{head}{'-dirty' if dirty else ''}" if head else None


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return round(kib / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return None


def _pg_version(dsn: str) -> str | None:
    async def fetch() -> str:
        conn = await asyncpg.connect(dsn)
        try:
            return str(await conn.fetchval("SHOW server_version"))
        finally:
            await conn.close()

    try:
        return asyncio.run(fetch())
    except (OSError, asyncpg.PostgresError):
        return None


def redis_command(redis_url: str, *words: str) -> bytes:
    """One Redis command over a plain socket (RESP): the harness itself needs no client."""
    hostport, _, db = redis_url.removeprefix("redis://").partition("/")
    host, _, port = hostport.partition(":")
    wire = b"".join(
        f"*{len(c)}\r\n".encode() + b"".join(f"${len(w)}\r\n{w}\r\n".encode() for w in c)
        for c in (["SELECT", db or "0"], list(words))
    )
    with socket.create_connection((host, int(port or 6379)), timeout=5) as s:
        s.sendall(wire)
        reply = s.makefile("rb")
        _read_reply(reply)  # SELECT's +OK
        return _read_reply(reply)


def _read_reply(f: Any) -> bytes:
    """Simple strings, errors, integers and bulk strings: all the harness asks for."""
    line = f.readline()
    if line.startswith(b"$"):
        size = int(line[1:])
        return b"" if size < 0 else f.read(size + 2)[:-2]
    if line.startswith(b"-"):
        raise OSError(f"redis: {line[1:].decode().strip()}")
    return bytes(line[1:].rstrip(b"\r\n"))


def redis_info(redis_url: str, field: str) -> str | None:
    try:
        text = redis_command(redis_url, "INFO", "server").decode(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None


QUIET_BUSY = 0.15
"""Share of the machine's CPU time (all cores) above which it is not quiet enough to start
measuring: the previous system's processes, PostgreSQL's clean-up after a dropped
database, or anything else on the machine."""


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies since boot over every core, from /proc/stat (Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def wait_until_quiet(limit: float, window: float = 1.0) -> dict[str, float | None]:
    """Wait until the machine's CPU was under ``QUIET_BUSY`` busy for one whole ``window``,
    or ``limit`` seconds passed. Every system's every workload starts after this, so none
    is measured on the tail of the one before. Returns the last window's busy share (None
    where /proc/stat is missing) and the seconds waited."""
    started = time.monotonic()
    busy: float | None = None
    while True:
        before = _cpu_times()
        time.sleep(window)
        after = _cpu_times()
        if before is None or after is None:
            break
        spent = after[1] - before[1]
        busy = (after[0] - before[0]) / spent if spent else 0.0
        if busy < QUIET_BUSY or time.monotonic() - started >= limit:
            break
    return {"cpu_busy_before": busy, "waited_quiet_s": round(time.monotonic() - started, 1)}
