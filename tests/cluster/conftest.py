"""A cluster of real ``cronwheel`` processes on one PostgreSQL database, and the checks
that read back what it did.

Each test gets a database of its own (created and dropped here) and a :class:`Cluster`
that starts schedulers and workers as child processes, signals them (SIGKILL, SIGSTOP,
SIGCONT) and reaps every one of them at the end, whatever happened.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

import pytest

import cronwheel
from cronwheel.core.model import AttemptOutcome, Run, RunState, ShardLease
from cronwheel.store.base import Store
from tests import pg

REPO = Path(__file__).resolve().parents[2]
APP = "tests.cluster.app:worker"
FULL = os.environ.get("CRONWHEEL_CLUSTER_FULL") == "1"
"""``CRONWHEEL_CLUSTER_FULL=1``: the scenarios at the scale docs/cluster.md's figures were
measured at (2,000 per-second cron jobs for 60 s, 5,000 runs through 10 kills, …).
Without it, as in CI, each runs the same scenario smaller (fewer jobs, a shorter window,
fewer kills): every property is still checked, in a fraction of the time (decision 0038,
"The cluster suite in under 100 s")."""

N = TypeVar("N", int, float)


def scale(quick: N, full: N) -> N:
    """``full`` with CRONWHEEL_CLUSTER_FULL=1, else ``quick``."""
    return full if FULL else quick


# -- the database ----------------------------------------------------------------------
# DROP DATABASE forces a checkpoint: 0.5-3 s on this machine's busy server, paid by each
# test's teardown. No later test needs the database gone, so it is dropped on a thread
# while the next test runs, and the session waits for every drop at its end.
_dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-database")
_drops: list[Future[None]] = []


def drop_later(name: str) -> None:
    """Drop database ``name`` in the background (see above)."""
    _drops.append(_dropper.submit(pg.drop_database, name))


def databases_dropped() -> None:
    """Wait for every database dropped so far; raise what a drop raised."""
    while _drops:
        _drops.pop(0).result()


@pytest.fixture(scope="session", autouse=True)
def _drop_databases_at_the_end() -> Iterator[None]:
    try:
        yield
    finally:
        databases_dropped()


@pytest.fixture
def cluster_db(pg_dsn: str) -> Iterator[str]:
    """A fresh, migrated database for one test (``pg_dsn`` fails the run in CI, and skips
    elsewhere, when PostgreSQL is down), dropped after it (in the background)."""
    name, dsn = pg.create_database("cronwheel_cluster")
    try:
        yield dsn
    finally:
        drop_later(name)


@pytest.fixture
async def cw(cluster_db: str) -> AsyncIterator[cronwheel.JobService]:
    """The test's own view of the cluster's store (migrated before any process starts,
    so the processes do not race to migrate)."""
    async with await cronwheel.connect(cluster_db, actor="cluster-test") as service:
        yield service


# -- the processes ---------------------------------------------------------------------
@dataclass
class Proc:
    """One ``cronwheel`` child process and its log."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL, then reap: nothing of the process survives but what it wrote."""
        if self.alive:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def terminate(self, timeout: float) -> float | None:
        """SIGTERM (a graceful stop), then wait: the seconds it took to exit, or None if it
        was still alive after ``timeout`` (it is then SIGKILLed, and reaped)."""
        started = time.monotonic()
        if self.alive:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        return time.monotonic() - started

    def freeze(self) -> None:
        self.popen.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.popen.send_signal(signal.SIGCONT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def owns(self, holder: str | None) -> bool:
        """Whether a worker id or a shard holder names this process (both embed its pid)."""
        return holder is not None and f"-{self.pid}-" in holder


class Cluster:
    """Starts ``cronwheel scheduler`` and ``cronwheel worker`` processes on one database."""

    def __init__(self, db: str, executions: Path, logs: Path) -> None:
        self.db = db
        self.executions = executions
        self.logs = logs
        self.procs: list[Proc] = []

    def start(self, name: str, *args: str, prefix: Sequence[str] = ()) -> Proc:
        """``[prefix…] python -m cronwheel ARGS``, its output in ``logs/<name>.log``."""
        log = self.logs / f"{name}.log"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
            "CRONWHEEL_TEST_EXECUTIONS": str(self.executions),
        }
        with open(log, "wb") as out:  # the child keeps its own copy of the descriptor
            popen = subprocess.Popen(
                [*prefix, sys.executable, "-m", "cronwheel", *args],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def scheduler(
        self, name: str, *, shards: int, shard_lease: float, extra: Sequence[str] = ()
    ) -> Proc:
        args = ["--shards", str(shards), "--shard-lease", str(shard_lease), *extra]
        return self.start(name, "scheduler", "--db", self.db, *args)

    def worker(
        self,
        name: str,
        *,
        lease: float,
        concurrency: int | None,
        db: str | None = None,
        prefix: Sequence[str] = (),
        extra: Sequence[str] = (),
    ) -> Proc:
        """None: the worker's default concurrency (by its handlers, decision 0034)."""
        size = [] if concurrency is None else ["--concurrency", str(concurrency)]
        args = ["--app", APP, "--lease", str(lease), *size, *extra]
        return self.start(name, "worker", "--db", db or self.db, *args, prefix=prefix)

    def close(self) -> None:
        for proc in self.procs:
            if proc.alive:
                proc.thaw()  # a stopped process still dies of SIGKILL, but be plain about it
            proc.kill()


@pytest.fixture
def cluster(cluster_db: str, tmp_path: Path) -> Iterator[Cluster]:
    executions, logs = tmp_path / "executions", tmp_path / "logs"
    executions.mkdir()
    logs.mkdir()
    c = Cluster(cluster_db, executions, logs)
    try:
        yield c
    finally:
        c.close()


# -- what happened ---------------------------------------------------------------------
class Execution(NamedTuple):
    """One handler start, as ``tests/cluster/app.py`` records it."""

    run_id: int
    attempt: int
    pid: int
    start_ns: int


def executions(folder: Path) -> list[Execution]:
    """Every execution recorded so far, by every worker process."""
    found: list[Execution] = []
    for path in sorted(folder.glob("*.log")):
        text = path.read_text()
        # Each line is one write(2), but a read racing it may see part of it: a line is
        # counted once its newline is there.
        for line in text[: text.rfind("\n") + 1].splitlines():
            run_id, attempt, pid, start_ns = (int(x) for x in line.split())
            found.append(Execution(run_id, attempt, pid, start_ns))
    return found


async def all_runs(store: Store) -> list[Run]:
    """Every run of the default tenant, page by page."""
    found: list[Run] = []
    before: int | None = None
    while True:
        page = await store.list_runs("default", before_id=before, limit=10_000)
        found += page
        if len(page) < 10_000:
            return found
        before = page[-1].id


async def quiet(store: Store) -> bool:
    """No run is pending or running any more."""
    for state in (RunState.PENDING, RunState.RUNNING):
        if await store.list_runs("default", state=state, limit=1):
            return False
    return True


@dataclass
class History:
    runs: int = 0
    executions: int = 0
    duplicates: int = 0
    """Executions beyond the first of their run."""
    lost: int = 0
    """Attempts recorded ``lost`` (an expired lease), executed or not."""


async def check_history(
    store: Store, runs: Sequence[Run], recorded: Sequence[Execution]
) -> History:
    """Assert that every run succeeded once, and that every other execution of it belongs
    to an attempt that the fence recorded as ``lost``.

    Exactly: each run is ``succeeded``; its attempts are numbered 1..``run.attempt``, all
    ``lost`` but the last, which ``succeeded``; each execution recorded for it names one
    of those attempts, by a worker with the attempt's pid, and no attempt was executed
    twice; the successful attempt was executed. So a duplicate execution is always the
    execution of an attempt whose lease expired, and is counted.
    """
    by_run: dict[int, list[Execution]] = defaultdict(list)
    for e in recorded:
        by_run[e.run_id].append(e)
    known = {r.id for r in runs}
    strays = sorted(set(by_run) - known)
    assert not strays, f"executions of runs that do not exist: {strays[:10]}"
    history = History(runs=len(runs), executions=len(recorded))
    for run in runs:
        assert run.state is RunState.SUCCEEDED, f"run {run.id} ended {run.state}"
        done = by_run.get(run.id, [])
        history.duplicates += max(len(done) - 1, 0)
        if run.attempt == 1 and [e.attempt for e in done] == [1]:
            continue  # the common case: claimed once, executed once, succeeded
        attempts = await store.list_attempts("default", run.id)
        history.lost += sum(a.outcome is AttemptOutcome.LOST for a in attempts)
        outcomes = [a.outcome for a in attempts]
        expected = [AttemptOutcome.LOST] * (run.attempt - 1) + [AttemptOutcome.SUCCEEDED]
        assert outcomes == expected, f"run {run.id}: attempts {outcomes}"
        assert [a.attempt for a in attempts] == list(range(1, run.attempt + 1))
        per_attempt = Counter(e.attempt for e in done)
        assert max(per_attempt.values(), default=0) <= 1, f"run {run.id}: {done}"
        assert per_attempt[run.attempt] == 1, f"run {run.id}: its success was not executed"
        for e in done:
            worker = attempts[e.attempt - 1].worker_id
            assert worker is not None and f"-{e.pid}-" in worker, (run.id, e, worker)
    return history


def shards_of(leases: Sequence[ShardLease], proc: Proc) -> set[int]:
    return {lease.shard for lease in leases if proc.owns(lease.holder) and lease.shard >= 0}


def fenced_out(proc: Proc, run_ids: Sequence[int]) -> set[int]:
    """The runs whose late report ``proc`` logged as refused: its completion fenced out,
    or its heartbeat told that the lease was lost (after which it drops the result)."""
    pattern = re.compile(r"run (\d+): (?:completion refused \(fenced out\)|lease lost)")
    said = {int(m.group(1)) for m in pattern.finditer(proc.output())}
    return said & set(run_ids)
