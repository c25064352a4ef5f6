"""Every execution, recorded by the handler itself, the same way for every system.

A handler calls :func:`record` first thing: one line ``key start [intended]`` appended
to the file named by ``CWBENCH_RECORD``. ``O_APPEND`` writes of one short line are
atomic, so any number of processes (prefork children included) can share the file, and
the count of lines is the count of executions: lost and duplicated executions are
counted from it, not from what the system says about itself.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

ENV = "CWBENCH_RECORD"
_fd: int | None = None
_pid: int | None = None


def record(key: str, intended: float | None = None) -> None:
    """Called by a handler: its own wall clock, taken before anything else."""
    started = time.time()
    global _fd, _pid
    if _fd is None or _pid != os.getpid():  # a forked child opens its own descriptor
        _fd = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _pid = os.getpid()
    tail = "-" if intended is None else f"{intended:.6f}"
    os.write(_fd, f"{key} {started:.6f} {tail}\n".encode())


@dataclass(frozen=True, slots=True)
class Execution:
    key: str
    started: float
    intended: float | None


def read(path: Path) -> list[Execution]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue  # a line cut by a killed process; never happens on a clean stop
        key, started, intended = parts
        found.append(Execution(key, float(started), None if intended == "-" else float(intended)))
    return found


def count(path: Path) -> int:
    if not path.exists():
        return 0
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def wait_for(path: Path, n: int, *, stall: float, deadline: float) -> int:
    """Wait until ``n`` executions are recorded, nothing new came for ``stall`` seconds,
    or the wall clock passes ``deadline``; return how many are recorded."""
    seen, last_change = count(path), time.monotonic()
    while seen < n and time.time() < deadline:
        time.sleep(0.02)
        now_seen = count(path)
        if now_seen != seen:
            seen, last_change = now_seen, time.monotonic()
        elif time.monotonic() - last_change > stall:
            break
    return seen
