"""Worker and scheduler processes: started in their own session, stopped by their pid.

Each process gets a new session so that stopping it also stops the children it forked
(Celery's prefork pool), and nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent.parent


def bench_env(record: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every spawned process: bench/ importable, where to record."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH_DIR), env.get("PYTHONPATH")]))
    env["CWBENCH_RECORD"] = str(record)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def compile_cronwheel(python: str, env: dict[str, str] | None = None) -> None:
    """Write the bytecode of the cronwheel that ``python`` imports, as pip does when it
    installs a package: an editable install (a checkout, a worktree) has none until a
    process writes it, and a shell with PYTHONDONTWRITEBYTECODE set never does, so each
    spawned process would time a compile, not a start."""
    code = "import compileall, cronwheel, pathlib;"
    code += " compileall.compile_dir(pathlib.Path(cronwheel.__file__).parent, quiet=1)"
    subprocess.run([python, "-c", code], env=env, check=True)


def spawn(cmd: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            list(cmd),
            env=env,
            cwd=BENCH_DIR,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def profile(procs: Sequence[subprocess.Popen[bytes]], name: str, log: Path) -> list[Any]:
    """With CWBENCH_PROFILE=dir, attach py-spy to each process (collapsed stacks, written
    when the process exits)."""
    out = os.environ.get("CWBENCH_PROFILE")
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not out or not pyspy:
        return []
    Path(out).mkdir(parents=True, exist_ok=True)
    record = [pyspy, "record", "--rate", "250", "--format", "raw", "--nonblocking"]
    return [
        spawn(
            [*record, "--pid", str(p.pid), "-o", f"{out}/{name}-{i}.txt"],
            dict(os.environ),
            log.with_suffix(".pyspy.log"),
        )
        for i, p in enumerate(procs)
    ]


def wait_profilers(profilers: Sequence[subprocess.Popen[bytes]]) -> None:
    """py-spy writes its file once its target exited; give it the time to."""
    for p in profilers:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def stop(procs: Sequence[subprocess.Popen[bytes]], *, grace: float = 10.0) -> None:
    """SIGTERM each process group (a graceful stop), SIGKILL what is left after ``grace``."""
    for p in procs:
        _signal_group(p, signal.SIGTERM)
    end = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, end - time.monotonic()))
        _signal_group(p, signal.SIGKILL)  # stray children of an exited leader, too
        p.wait()


def _signal_group(p: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, sig)


def check_alive(procs: Sequence[subprocess.Popen[bytes]], log: Path) -> None:
    """Fail fast with the process's own words when it died instead of serving."""
    for p in procs:
        if p.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            errors = [
                line for line in tail.splitlines() if re.match(r"[\w.]+(Error|Exception)\b", line)
            ]
            why = errors[-1] if errors else "see its log"
            cmd = " ".join(str(a) for a in p.args) if isinstance(p.args, list) else str(p.args)
            raise RuntimeError(f"{cmd} exited {p.returncode}: {why}\n{tail}")
