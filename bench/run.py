"""bench/run: run workloads on cronwheel and its peers, print a table, write JSON.

Each (system, workload) runs in a fresh PostgreSQL database (``cwbench_*``, dropped
after) or SQLite file, and a flushed Redis database, through an adapter subprocess:
cronwheel's runs with this interpreter, each peer's with its own virtualenv's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from rich.console import Console

import machine
import report
import venvs
from lib.proc import compile_cronwheel
from lib.spec import WORKLOADS, params

HERE = Path(__file__).resolve().parent
CRONWHEEL = ("cronwheel-pg", "cronwheel-sqlite")
# Only these get a database or a flushed Redis: cronwheel-sqlite needs neither server.
ON_PG = ("cronwheel-pg", "pgqueuer", "procrastinate")
ON_REDIS = ("celery", "arq")
PEERS = tuple(venvs.PINS)
SYSTEMS = CRONWHEEL + PEERS
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/15"  # a database of its own: flushed freely


def _choices(values: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    chosen: list[str] = []
    for v in (x.strip() for value in values for x in value.split(",")):
        names = list(allowed) if v == "all" else [v]
        for name in names:
            if name not in allowed:
                raise SystemExit(f"bench/run: unknown {what} {name!r}; one of {', '.join(allowed)}")
            if name not in chosen:
                chosen.append(name)
    return chosen


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/run", description=__doc__)
    p.add_argument("--system", action="append", default=[], help="repeatable, or a,b; or all")
    p.add_argument("--workload", action="append", default=[], help="W1..W6, repeatable; or all")
    p.add_argument("--quick", action="store_true", help="small sizes (CI)")
    p.add_argument("--json", type=Path, help="where to write the results")
    p.add_argument("--pg", default=os.environ.get("CWBENCH_PG_DSN", DEFAULT_PG))
    p.add_argument("--redis", default=os.environ.get("CWBENCH_REDIS_URL", DEFAULT_REDIS))
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="W.KEY=VALUE",
        help="override a size, e.g. W1.n=200000 (profiling, or the largest size that fits)",
    )
    p.add_argument("--timeout", type=float, default=1800, help="seconds per system+workload")
    a = p.parse_args()
    a.systems = _choices(a.system or ["all"], SYSTEMS, "system")
    a.workloads = _choices(a.workload or ["all"], WORKLOADS, "workload")
    return a


async def _admin(pg: str, statement: str) -> None:
    conn = await asyncpg.connect(pg)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _admin_retrying(pg: str, statement: str, tries: int = 30) -> None:
    """Other work shares this server and may restart it: wait for it to come back, so
    that a benchmark database is never left behind."""
    for attempt in range(tries):
        try:
            asyncio.run(_admin(pg, statement))
            return
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            if attempt == tries - 1:
                raise
            time.sleep(1)


def _database(pg: str, system: str, workload: str) -> tuple[str, str]:
    name = re.sub(r"[^a-z0-9_]", "_", f"cwbench_{system}_{workload}_{os.getpid()}".lower())
    return name, re.sub(r"/[^/]*$", f"/{name}", pg)


def _params(a: argparse.Namespace, workload: str) -> dict[str, Any]:
    found = params(workload, a.quick)
    for item in a.set:
        target, _, value = item.partition("=")
        w, _, key = target.partition(".")
        if w == workload:
            if key not in found:
                raise SystemExit(f"bench/run: {workload} has no size {key!r}: {sorted(found)}")
            found[key] = type(found[key])(value)
    return found


def _profiler(name: str) -> list[str]:
    """With CWBENCH_PROFILE=dir, cronwheel's driver (enqueue, W5's bulk create and ticks)
    runs under py-spy too; its worker and scheduler processes are profiled by the flows."""
    out = os.environ.get("CWBENCH_PROFILE")
    pyspy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not out or not pyspy:
        return []
    Path(out).mkdir(parents=True, exist_ok=True)
    return [pyspy, "record", "--rate", "250", "--format", "raw", "-o", f"{out}/{name}.txt", "--"]


def _adapter(
    cmd: list[str], env: dict[str, str], log: Any, timeout: float
) -> tuple[int | None, bytes]:
    """Run an adapter; on timeout SIGTERM it first, so that it stops the worker processes
    it started (they live in sessions of their own), and SIGKILL it only if it hangs."""
    p = subprocess.Popen(cmd, cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=log)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        p.terminate()
        try:
            out, _ = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        return None, out


def run_one(a: argparse.Namespace, system: str, workload: str, root: Path) -> dict[str, Any]:
    workdir = root / f"{system}-{workload}"
    workdir.mkdir(parents=True)
    db, dsn = _database(a.pg, system, workload)
    if system in ON_PG:
        _admin_retrying(a.pg, f"CREATE DATABASE {db}")
    load = os.getloadavg()[0]
    quiet = machine.wait_until_quiet(limit=5.0 if a.quick else 60.0)
    if system in ON_REDIS:
        machine.redis_command(a.redis, "FLUSHDB")
    if system in CRONWHEEL:
        cmd = [*_profiler(f"{system}-{workload}-driver"), sys.executable, "-m", "cw.adapter"]
    else:
        cmd = [str(venvs.python(system)), "-m", f"peers.{system}"]
    cmd += ["--system", system, "--workload", workload, "--workdir", str(workdir)]
    cmd += ["--params", json.dumps(_params(a, workload)), "--pg-dsn", dsn]
    cmd += ["--redis-url", a.redis]
    # bench/ first; a PYTHONPATH given (a worktree's cronwheel) is kept after it.
    env = _env()
    started = time.monotonic()
    try:
        with (workdir / "adapter.log").open("wb") as log:
            code, out = _adapter(cmd, env, log, a.timeout)
        # The adapter's last JSON line (py-spy, when profiling, prints after it).
        lines = [x for x in out.decode(errors="replace").splitlines() if x[:1] == "{"]
        result = json.loads(lines[-1]) if lines else {}
        if not result:
            result = {"status": "error", "reason": f"adapter exited {code}"}
        if code is None:
            result = {"status": "error", "reason": f"timed out after {a.timeout} s"}
    except json.JSONDecodeError:
        result = {"status": "error", "reason": f"no result; see {workdir}/adapter.log"}
    finally:
        if system in ON_PG:
            _admin_retrying(a.pg, f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        if system in ON_REDIS:
            machine.redis_command(a.redis, "FLUSHDB")
    if result.get("status") == "error":
        # The table gets the first line; the logs keep the whole story.
        result["reason"] = (str(result.get("reason", "")).strip().splitlines() or [""])[0][:300]
        result["logs"] = str(workdir)
    elapsed = round(time.monotonic() - started, 1)
    head = {"system": system, "workload": workload, "quick": a.quick}
    # The 1-minute load average and the CPU's busy share just before the run: the machine
    # is shared, and a busy one shows in latencies.
    extra = {"params": _params(a, workload), "elapsed_s": elapsed, "load_before": load}
    extra |= quiet
    return head | extra | result


def _env() -> dict[str, str]:
    """The adapters' environment: bench/ first on the path, then a PYTHONPATH given (a
    worktree's cronwheel); bytecode written and read, as an installed package's is."""
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1")
    # A shell with PYTHONDONTWRITEBYTECODE set (this machine's do) would have every
    # cronwheel process compile the package from source at its start, 0.1-0.2 s of a
    # worker's spawn, where the peers' packages, installed by pip, have their bytecode.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def main() -> int:
    a = _args()
    # Wide enough for every table even when stdout is a CI log, not a terminal.
    console = Console(width=None if sys.stdout.isatty() else 120)
    info = machine.describe(a.pg, a.redis)
    console.print(
        f"[bold]cronwheel bench[/] {'quick' if a.quick else 'full'} — {info['date']}, "
        f"{info['nproc']} cores, {info['memory_gib']} GiB, Python {info['python']}, "
        f"PostgreSQL {info['postgresql']}, Redis {info['redis']}"
    )
    root = Path(tempfile.mkdtemp(prefix="cwbench-"))
    if any(system in CRONWHEEL for system in a.systems):
        compile_cronwheel(sys.executable, _env())
    results: list[dict[str, Any]] = []
    for workload in a.workloads:
        for system in a.systems:
            console.print(f"… {system} {workload}", style="dim")
            result = run_one(a, system, workload, root)
            results.append(result)
            if result.get("status") == "error":
                console.print(f"  {system} {workload}: {result['reason']}", style="red")
    report.print_tables(results, console)
    out = a.json or _default_path(a)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": info, "results": results}, indent=2) + "\n")
    console.print(f"results: {out}  (logs: {root})")
    return 1 if any(r.get("status") == "error" for r in results) else 0


def _default_path(a: argparse.Namespace) -> Path:
    date = datetime.now(UTC).strftime("%Y-%m-%dT%H%M%S")
    systems = "all" if len(a.systems) == len(SYSTEMS) else "+".join(a.systems)
    workloads = "all" if len(a.workloads) == len(WORKLOADS) else "+".join(a.workloads)
    return HERE / "results" / f"{date}-{systems}-{workloads}{'-quick' if a.quick else ''}.json"


if __name__ == "__main__":
    sys.exit(main())
