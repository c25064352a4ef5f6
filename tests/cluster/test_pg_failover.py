"""Issue 31, item 3: the PostgreSQL primary dies mid-load, its synchronous standby is
promoted, and nothing is lost.

A primary and its synchronous standby run on this machine (tests/cluster/pgha.py); an
API, two schedulers and two workers run on the multi-host URL
``postgresql://…@primary,standby/db?target_session_attrs=read-write`` with every-second
cron jobs and delayed webhook jobs firing, and a client creating an immediate webhook job
every tenth of a second through the API. The primary is stopped hard (immediate
shutdown) and the standby promoted. Read back from the new primary, the receiver and the
handlers' records:

- every job the API acknowledged (before, during or after the failover) is there;
- every run the test read from the primary just before its death is there, never with an
  older fence or a less finished state; every execution that began before the death has
  its run, with its attempt;
- no due occurrence is missed: each second of each cron job's window has its run, fired
  or recorded skipped; every delayed and immediate job was delivered;
- duplicates only with a newer fence (test_overload's checks);
- every process lives on, and works on the new primary, without a restart; the API
  answers 503 while no primary answers, never a 500; each process says the outage once
  per loop (no retry floods its log).

It prints the promotion time and the failover time: from the primary's death to the
first run started on the new primary (the delivery of the first immediate job whose
creation was asked once the primary was dead: created, claimed and started there).
bench/failover.py runs the same with asynchronous replication, to show what that window
costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

import cronwheel
from cronwheel.core.model import Run, RunState
from tests import pg
from tests.cluster import pgha
from tests.cluster.conftest import Cluster, Execution, Proc, all_runs, executions, shards_of
from tests.cluster.test_overload import Findings, check_delivered, check_runs, check_window
from tests.e2e.procs import free_port
from tests.engine.helpers import eventually
from tests.engine.webhook_target import Received, webhook_target

# It asserts no duration (the failover time is printed; bench/failover.py measures it)
# and shares nothing: its primary and standby are its own, on free ports, and the
# machine's PostgreSQL is not touched. It runs in the parallel phase (decision 0038).
pytestmark = pytest.mark.beside_others

CRON_JOBS = 30
WEBHOOK_JOBS = 60
WINDOW_SECONDS = 16
"""The cron jobs' window; the delayed jobs fall due within it too."""
KILL_AFTER = 6
"""Seconds into the window the primary dies."""
CREATE_EVERY = 0.1
"""How often the client creates an immediate webhook job through the API."""
SHARDS = 8
SHARD_LEASE = 3.0
WORKER_LEASE = 6.0
LOOPBACK = "127.0.0.0/8"
DATABASE = "cronwheel"
OUTAGE_SAID = re.compile(r"(\w[\w ]*) failed; retrying with backoff")
"""The line each loop logs once per outage (cronwheel/engine/_outage.py)."""
FLOOR_RETRY = "Failed to restore the pool connection floor"
"""asyncpg's pool warning, with a traceback, at each retry: cronwheel drops it."""


@pytest.fixture
async def pair_sync() -> AsyncIterator[pgha.Pair]:
    async with ha_database(sync=True) as pair:
        yield pair


@contextlib.asynccontextmanager
async def ha_database(*, sync: bool) -> AsyncIterator[pgha.Pair]:
    """A primary and its standby (pgha.ha_pair) with the DATABASE created; skipped (failed
    in CI) where the machine cannot run them."""
    reason = pgha.available()
    if reason is not None:
        if pg.REQUIRED:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    with pgha.ha_pair(sync=sync) as pair:
        await pgha.wait_streaming(pair)
        conn = await asyncpg.connect(pair.primary.dsn(), timeout=10)
        try:
            await conn.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            await conn.close()
        yield pair


@pytest.fixture
def ha_cluster(pair_sync: pgha.Pair, tmp_path: Path) -> Cluster:
    executions_dir, logs = tmp_path / "executions", tmp_path / "logs"
    executions_dir.mkdir()
    logs.mkdir()
    return Cluster(pair_sync.dsn(DATABASE), executions_dir, logs)


@pytest.mark.timeout(240)
async def test_a_promoted_synchronous_standby_takes_over_and_nothing_is_lost(
    pair_sync: pgha.Pair, ha_cluster: Cluster
) -> None:
    try:
        report = await failover(pair_sync, ha_cluster)
    finally:
        ha_cluster.close()
    print(f"\nfailover (synchronous replication): {report.summary()}")
    failures = report.findings.failures()
    failures.update({k: v[:10] for k, v in report.losses.items() if v})
    if report.losses["API answers but 201 and 503"]:
        # A 500's body says nothing internal: its traceback is in the API's log.
        failures["the API's log of those answers"] = _crashes(ha_cluster.logs / "api.log")
    assert not failures, failures
    assert report.failover_seconds is not None, "no run started on the new primary"


def _crashes(log: Path) -> list[str]:
    """The tracebacks the API logged for the requests it answered with a 500."""
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    starts = [i for i, line in enumerate(lines) if "unhandled error on" in line]
    return ["\n".join(lines[i : i + 60]) for i in starts[:3]]


class Report:
    def __init__(self) -> None:
        self.findings = Findings()
        self.losses: dict[str, list[object]] = {
            "acknowledged jobs lost": [],
            "runs read before the death lost or gone back": [],
            "executions whose run or attempt was lost": [],
            "processes that died": [],
            "processes idle on the new primary": [],
            "API answers but 201 and 503": [],
            "outages said more than once": [],
        }
        self.promote_seconds = 0.0
        self.failover_seconds: float | None = None
        self.runs = 0
        self.acked = 0

    def summary(self) -> str:
        f = self.findings
        failover = "never" if self.failover_seconds is None else f"{self.failover_seconds:.2f} s"
        lost = sum(len(v) for v in self.losses.values())
        return (
            f"standby promoted {self.promote_seconds:.2f} s and first run started on the new"
            f" primary {failover} after the primary's death; {self.runs} runs, {self.acked}"
            f" jobs acknowledged by the API; {lost} losses, {f.duplicates} duplicate"
            f" executions, {f.lost_attempts} lost attempts, {f.skipped} skipped (misfire)"
        )


async def failover(pair: pgha.Pair, cluster: Cluster, *, lag: float = 0.0) -> Report:
    """The scenario of the module's docstring; what it found, to assert or to print.
    ``lag``: seconds the standby is held behind (the primary's WAL sender frozen) just
    before the primary dies, and then every process of the primary is SIGKILLed."""
    report = Report()
    port = free_port()
    allow = ["--webhook-allow", LOOPBACK]
    api = cluster.start("api", "api", "--db", cluster.db, "--port", str(port), "--no-auth", *allow)
    schedulers = [
        cluster.scheduler(f"scheduler-{i}", shards=SHARDS, shard_lease=SHARD_LEASE)
        for i in range(2)
    ]
    workers = [
        cluster.worker(f"worker-{i}", lease=WORKER_LEASE, concurrency=None, extra=allow)
        for i in range(2)
    ]
    everyone = [api, *schedulers, *workers]
    async with (
        await cronwheel.connect(cluster.db, actor="failover-test") as cw,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
    ):
        store = cw.store

        async def api_up() -> bool:
            with contextlib.suppress(httpx.TransportError):
                return (await client.get("/healthz")).status_code == 200
            return False

        await eventually(api_up, timeout=90)

        async def spread() -> bool:
            leases = [lease for lease in await store.list_shard_leases() if lease.shard >= 0]
            owned = [shards_of(leases, s) for s in schedulers]
            return sum(map(len, owned)) == SHARDS and all(owned)

        await eventually(spread, timeout=90)

        with webhook_target() as target:
            now = await store.now()
            first = now.replace(microsecond=0) + timedelta(seconds=3)
            last = first + timedelta(seconds=WINDOW_SECONDS - 1)
            cron = {
                "kind": "cron",
                "cron": "* * * * * *",
                "start_at": first.isoformat(),
                "end_at": last.isoformat(),
            }
            hook = {"type": "webhook", "url": f"{target.url}/hook"}
            noop = {"type": "handler", "name": "noop"}
            specs: list[dict[str, object]] = [
                {"name": f"tick-{i}", "schedule": cron, "action": noop} for i in range(CRON_JOBS)
            ]
            spread_over = WINDOW_SECONDS / WEBHOOK_JOBS
            specs += [
                {
                    "name": f"later-{i}",
                    "schedule": {"kind": "delay", "seconds": 3 + i * spread_over},
                    "action": hook,
                }
                for i in range(WEBHOOK_JOBS)
            ]
            response = await client.post("/v1/jobs/batch", json={"jobs": specs})
            assert response.status_code == 201, response.text
            jobs = response.json()["items"]
            tick_ids = [j["id"] for j in jobs if j["name"].startswith("tick-")]
            later = {j["id"]: j["name"] for j in jobs if j["name"].startswith("later-")}

            acked: dict[str, float] = {}  # immediate job id → when the API acknowledged it
            refused = report.losses["API answers but 201 and 503"]
            creating = asyncio.ensure_future(_create_immediate(client, hook, acked, refused))
            try:
                await asyncio.sleep((first - await store.now()).total_seconds() + KILL_AFTER)
                if lag:
                    # The standby falls behind: the primary's sender stops sending (a
                    # slow link, a standby busy replaying), its commits go on, or wait.
                    sender = await pgha.walsender_pid(pair)
                    os.kill(sender, signal.SIGSTOP)
                    await asyncio.sleep(lag)
                before = {r.id: r for r in await all_runs(store)}
                died_at = time.time()
                # In threads: the client goes on creating jobs meanwhile, as clients do.
                # (the frozen sender must send nothing more: every process SIGKILLed)
                await asyncio.to_thread(pair.primary.crash if lag else pair.primary.kill)
                dead_at = time.time()
                await asyncio.to_thread(pair.standby.promote)
                promoted_at = time.time()
                report.promote_seconds = promoted_at - died_at

                async def first_on_new() -> float | None:
                    return _first_start_on_new(target.received, acked, died_at, dead_at)

                report.failover_seconds = await eventually(first_on_new, timeout=90)
                await asyncio.sleep(max((last - await store.now()).total_seconds(), 0) + 1)
            finally:
                creating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await creating
            immediate = {job_id: f"now-{job_id[:8]}" for job_id in acked}
            due_by = last + timedelta(seconds=1)

            async def drained() -> bool:
                if await store.fetch_due_jobs(due_by, limit=1):
                    return False
                for state in (RunState.PENDING, RunState.RUNNING):
                    if await store.list_runs("default", state=state, limit=1):
                        return False
                return len(_delivered_ids(target.received)) >= len(later) + len(immediate)

            with contextlib.suppress(AssertionError):  # what is left is found below
                await eventually(drained, timeout=90)
            received = list(target.received)

        runs = await all_runs(store)
        report.runs = len(runs)
        report.acked = len(acked)
        recorded = executions(cluster.executions)
        await check_runs(store, runs, recorded, received, report.findings)
        check_window(runs, tick_ids, first, last, report.findings)
        check_delivered(runs, {**later, **immediate}, received, report.findings)
        _check_kept(report, runs, before, recorded, died_at)
        await _check_jobs(report, cw, set(acked))
        _check_processes(report, everyone, workers, recorded, received, runs, promoted_at)
    return report


async def _create_immediate(
    client: httpx.AsyncClient, hook: dict[str, str], acked: dict[str, float], refused: list[str]
) -> None:
    """An immediate webhook job every CREATE_EVERY seconds, through the API, whatever it
    answers; the ones it acknowledged (201) are recorded with the instant the request was
    sent. Any answer but 201 or 503 (the store unavailable: retry) is recorded in
    ``refused``: an outage must never look like a server error or a bad request."""
    n = 0
    while True:
        n += 1
        spec = {"name": f"now-{n}", "schedule": {"kind": "immediate"}, "action": hook}
        sent = time.time()
        with contextlib.suppress(httpx.HTTPError):
            response = await client.post("/v1/jobs", json=spec)
            if response.status_code == 201:
                acked[response.json()["id"]] = sent
            elif response.status_code != 503:
                refused.append(f"{response.status_code}: {response.text[:300]}")
        await asyncio.sleep(CREATE_EVERY)


def _delivered_ids(received: list[Received]) -> set[int]:
    return {int(r.headers["Cronwheel-Run-Id"]) for r in received}


def _first_start_on_new(
    received: list[Received], acked: dict[str, float], died_at: float, dead_at: float
) -> float | None:
    """Seconds from the death (``died_at``, when it began) to the first delivery of a job
    whose creation was asked for once the primary was gone (``dead_at``): a job that
    exists on the new primary only, created, claimed and started there."""
    new = {job_id for job_id, sent in acked.items() if sent > dead_at}
    times = [r.at for r in received if r.headers.get("Cronwheel-Job-Id") in new]
    return min(times) - died_at if times else None


def _check_kept(
    report: Report,
    runs: list[Run],
    before: dict[int, Run],
    recorded: list[Execution],
    died_at: float,
) -> None:
    """What the primary had committed before its death is on the new one: each run read
    from it, with a fence and a progress at least as far; each execution's attempt."""
    now = {r.id: r for r in runs}
    gone = report.losses["runs read before the death lost or gone back"]
    for run_id, old in before.items():
        new = now.get(run_id)
        if new is None:
            gone.append(f"run {run_id} ({old.state.value}) is gone")
        elif new.fence < old.fence or new.attempt < old.attempt:
            gone.append(f"run {run_id}: fence {old.fence} → {new.fence}")
        elif _went_back(old.state, new.state):
            gone.append(f"run {run_id}: {old.state.value} → {new.state.value}")
    lost = report.losses["executions whose run or attempt was lost"]
    for e in recorded:
        if e.start_ns / 1e9 < died_at:
            run = now.get(e.run_id)
            if run is None or run.attempt < e.attempt:
                lost.append(f"execution {e}: run {'gone' if run is None else run.attempt}")


def _went_back(old: RunState, new: RunState) -> bool:
    """A finished run that changed, or a running run pending again (lost state)."""
    rank = {RunState.PENDING: 0, RunState.RUNNING: 1}
    if old not in rank:
        return new is not old
    return new in rank and rank[new] < rank[old]


async def _check_jobs(report: Report, cw: cronwheel.JobService, acked: set[str]) -> None:
    """Every job the API acknowledged is on the new primary."""
    for job_id in sorted(acked):
        if await cw.store.get_job("default", job_id) is None:
            report.losses["acknowledged jobs lost"].append(job_id)


def _check_processes(
    report: Report,
    everyone: list[Proc],
    workers: list[Proc],
    recorded: list[Execution],
    received: list[Received],
    runs: list[Run],
    since: float,
) -> None:
    """Every process lived through it, and every worker started runs on the new primary
    (a handler or a webhook run whose attempt names the worker) without a restart."""
    for proc in everyone:
        if not proc.alive:
            report.losses["processes that died"].append(f"{proc.name}:\n{proc.output()[-3000:]}")
        said = Counter(OUTAGE_SAID.findall(proc.output()))
        floods = [f"{proc.name}: {what!r} {n} times" for what, n in said.items() if n > 1]
        if FLOOR_RETRY in proc.output():
            floods.append(f"{proc.name}: asyncpg's {FLOOR_RETRY!r}")
        report.losses["outages said more than once"] += floods
    started = {e.pid for e in recorded if e.start_ns / 1e9 > since}
    by_id = {r.id: r for r in runs}
    for r in received:
        run = by_id.get(int(r.headers["Cronwheel-Run-Id"]))
        if r.at > since and run is not None and run.lease_owner is not None:
            started |= {w.pid for w in workers if w.owns(run.lease_owner)}
    for w in workers:
        if w.pid not in started:
            report.losses["processes idle on the new primary"].append(w.name)
