"""Real cronwheel processes for end-to-end tests: started, watched, signalled, reaped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def cronwheel(
    *args: str,
    env: dict[str, str] | None = None,
    log: Path | None = None,
    stderr: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``python -m cronwheel ARGS`` as a child process; killed at the end if still alive.
    Its stdout and stderr go to ``log``, or stderr to ``stderr`` when given."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    err = open(stderr, "wb") if stderr else subprocess.STDOUT  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "cronwheel", *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        stdout=out,
        stderr=err,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if log:
            out.close()  # type: ignore[union-attr]
        if stderr:
            err.close()  # type: ignore[union-attr]


def free_port() -> int:
    """A port nobody listens on now, for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(what: str, check: Callable[[], Any], timeout: float, logs: Sequence[Path]) -> Any:
    """Poll ``check`` (a server not answering yet counts as not yet) until it returns
    something truthy, and return it; past ``timeout``, fail with what the processes
    printed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if result := check():
                return result
        except httpx.TransportError:
            pass
        time.sleep(0.05)  # a process starting is seen within 50 ms
    printed = "\n".join(f"== {p.name}\n{p.read_text()}" for p in logs)
    raise AssertionError(f"{what} within {timeout} s; the processes printed:\n{printed}")
