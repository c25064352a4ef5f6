"""bench/failover.py: what a PostgreSQL failover costs, with synchronous and with
asynchronous replication (issue 31 item 3; decision 0050).

Runs tests/cluster/test_pg_failover.py's scenario (a primary and a standby on this
machine, an API, two schedulers and two workers on the multi-host URL, cron and webhook
jobs firing, the primary stopped hard and the standby promoted) once per round and mode,
and prints, for each: the promotion time, the time from the primary's death to the first
run started on the new primary, and what was lost or repeated. With asynchronous
replication a commit does not wait for the standby: whatever it had not received when
the primary died is gone (acknowledged jobs, runs, completions), which the losses count.

    sudo .venv/bin/python bench/failover.py --rounds 3 --mode sync --mode async

As root (PostgreSQL runs as the postgres OS user); the machine's own PostgreSQL is not
touched.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.conftest import Cluster
from tests.cluster.test_pg_failover import DATABASE, Report, failover, ha_database


def folders(root: str) -> tuple[Path, Path]:
    executions, logs = Path(root, "executions"), Path(root, "logs")
    executions.mkdir()
    logs.mkdir()
    return executions, logs


async def one(sync: bool, lag: float) -> Report:
    async with ha_database(sync=sync) as pair:
        with tempfile.TemporaryDirectory() as folder:
            executions, logs = folders(folder)
            cluster = Cluster(pair.dsn(DATABASE), executions, logs)
            try:
                return await failover(pair, cluster, lag=lag)
            finally:
                cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--mode", action="append", choices=("sync", "async"))
    parser.add_argument(
        "--lag",
        type=float,
        default=0.0,
        help="seconds the standby is held behind before the primary dies (its WAL sender"
        " frozen; then every process of the primary is SIGKILLed): the window made visible",
    )
    args = parser.parse_args()
    for mode in args.mode or ["sync", "async"]:
        times: list[float] = []
        for n in range(args.rounds):
            report = asyncio.run(one(mode == "sync", args.lag))
            print(f"{mode} lag {args.lag:g} s #{n + 1}: {report.summary()}", flush=True)
            for what, found in {**report.losses, **report.findings.failures()}.items():
                if found:
                    print(f"    {what}: {len(found)}, e.g. {found[:3]}", flush=True)
            if report.failover_seconds is not None:
                times.append(report.failover_seconds)
        if times:
            print(
                f"{mode}: failover (death → first run started on the new primary) median"
                f" {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)}"
            )


if __name__ == "__main__":
    main()
