"""The contract between bench/run.py and an adapter (``python -m peers.<name>`` or
``python -m cw.adapter``): arguments in, one JSON object on the last line of stdout."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Result = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Args:
    workload: str
    params: dict[str, Any]
    pg_dsn: str
    redis_url: str
    workdir: Path
    system: str


def parse() -> Args:
    p = argparse.ArgumentParser()
    p.add_argument("--workload", required=True)
    p.add_argument("--params", required=True, help="the workload's sizes, as JSON")
    p.add_argument("--pg-dsn", required=True)
    p.add_argument("--redis-url", required=True)
    p.add_argument("--workdir", required=True, type=Path)
    p.add_argument("--system", default="")
    a = p.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    return Args(a.workload, json.loads(a.params), a.pg_dsn, a.redis_url, a.workdir, a.system)


def not_expressible(reason: str, short: str | None = None) -> Result:
    """``short`` goes in the table; ``reason`` in the JSON and the README."""
    return {"status": "not expressible", "reason": reason, "short": short or reason}


def main(workloads: dict[str, Callable[[Args], Result]], info: Callable[[], Result]) -> None:
    """Run one workload and print its result; any failure is a result too."""
    # SIGTERM (run.py's timeout) becomes SystemExit, so every `finally` runs and the
    # worker processes this adapter started are stopped, not orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args = parse()
    fn = workloads.get(args.workload)
    try:
        result: Result = {"status": "ok"} | fn(args) if fn else not_expressible("no such workload")
    except Exception as exc:
        traceback.print_exc()
        result = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    result |= info()
    sys.stdout.flush()
    print("\n" + json.dumps(result), flush=True)
