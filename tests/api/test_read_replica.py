"""The API's lists and history from a read replica (decision 0030), against a real
streaming standby: this test makes its own PostgreSQL primary and standby (the system
server allows no replication connections, and tests do not change the machine), in
temporary folders, on free ports, and stops and removes them whatever happens."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from click.testing import CliRunner

from cronwheel.api import AuthConfig, create_app
from cronwheel.cli.api import api
from cronwheel.core.clock import FrozenClock
from cronwheel.core.model import Tenant
from cronwheel.observability import metrics
from cronwheel.store.base import Store
from cronwheel.store.postgres import PostgresStore
from cronwheel.store.replica import ROUTED, ReplicaReads
from tests import pg
from tests.api.conftest import connect
from tests.api.helpers import ADMIN_TOKEN, spec
from tests.api.test_process import free_port, wait_until_up
from tests.e2e.procs import cronwheel

BIN = Path(os.environ.get("CRONWHEEL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
TIMEOUT = 30.0
"""Seconds any wait of this file may take on a busy machine before it fails."""


@dataclass
class Pair:
    """A primary and its streaming standby, both local, both ours."""

    root: Path
    primary_port: int
    standby_port: int

    @property
    def primary(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.primary_port}/postgres"

    @property
    def standby(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.standby_port}/postgres"

    def ctl(self, *args: str) -> None:
        _run(BIN / "pg_ctl", *args)

    def stop_standby(self) -> None:
        self.ctl("stop", "-D", str(self.root / "standby"), "-m", "immediate", "-w")


def _as_postgres() -> list[str]:
    """initdb refuses to run as root: the binaries run as the postgres OS user then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _run(*command: Any) -> None:
    done = subprocess.run(
        [*_as_postgres(), *map(str, command)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command} failed ({done.returncode}): {done.stdout}{done.stderr}")


def _start(pair: Pair, name: str, port: int) -> None:
    folder = pair.root / name
    options = (
        f"-p {port} -k {pair.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        " -c shared_buffers=16MB -c max_connections=30 -c wal_receiver_status_interval=1"
    )
    pair.ctl("start", "-D", str(folder), "-l", str(pair.root / f"{name}.log"), "-w", "-o", options)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    """A primary (initdb, trust, replication allowed over loopback: initdb's own
    pg_hba.conf) and a standby made by pg_basebackup -R, streaming from it."""
    missing = [b for b in ("initdb", "pg_ctl", "pg_basebackup") if not (BIN / b).exists()]
    if missing:
        reason = f"the PostgreSQL binaries {missing} are not in {BIN} (CRONWHEEL_TEST_PG_BIN)"
        if pg.REQUIRED:
            pytest.fail(f"{reason}; CI requires the read-replica test to run", pytrace=False)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="cwtest-replica-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    found = Pair(root, free_port(), free_port())
    started: list[str] = []
    try:
        _run(BIN / "initdb", "-D", root / "primary", "-U", "postgres", "--auth=trust", "-N")
        _start(found, "primary", found.primary_port)
        started.append("primary")
        _run(
            BIN / "pg_basebackup",
            *("-h", "127.0.0.1", "-p", found.primary_port, "-U", "postgres"),
            *("-D", root / "standby", "-R", "-X", "stream", "-c", "fast"),
        )
        _start(found, "standby", found.standby_port)
        started.append("standby")
        yield found
    finally:
        for name in reversed(started):
            # Already stopped by a test, or gone: nothing to do.
            subprocess.run(
                [*_as_postgres(), BIN / "pg_ctl", "stop", "-D", root / name, "-m", "immediate"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)


async def _until(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    """Wait until ``check()`` holds (it is a read of real state), or fail saying what."""
    deadline = time.monotonic() + TIMEOUT
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {TIMEOUT:g} s: {what}")
        await asyncio.sleep(0.05)


def _reads(served_by: str) -> float:
    found = metrics.default().registry.get_sample_value(
        "cronwheel_replica_reads_total", {"served_by": served_by}
    )
    return found or 0.0


async def _replayed(standby: asyncpg.Connection[Any], primary: PostgresStore) -> bool:
    position = await primary.wal_position()
    done: bool = await standby.fetchval(
        "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", position
    )
    return done


@pytest.fixture
async def stores(pair: Pair) -> AsyncIterator[tuple[PostgresStore, ReplicaReads]]:
    primary = await PostgresStore.connect(pair.primary)
    await primary.migrate()
    await primary.truncate_all_for_tests()
    router = await ReplicaReads.open(primary, pair.standby, max_lag=30.0, check_every=0.1)
    try:
        yield primary, router
    finally:
        await router.close()


async def _names(client: httpx.AsyncClient) -> set[str]:
    response = await client.get("/v1/jobs", params={"limit": 100})
    assert response.status_code == 200, response.text
    return {job["name"] for job in response.json()["items"]}


async def test_lists_read_the_replica_within_the_bound_and_the_primary_beyond_it(
    pair: Pair, stores: tuple[PostgresStore, ReplicaReads]
) -> None:
    primary, router = stores
    app = create_app(router, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    standby = await asyncpg.connect(pair.standby)
    try:
        async with connect(app, ADMIN_TOKEN) as client:
            # A job created is listed once the standby has replayed it, read from there.
            created = await client.post("/v1/jobs", json=spec("replicated"))
            assert created.status_code == 201, created.text
            await _until("the standby replays the job", lambda: _replayed(standby, primary))
            before = _reads("replica")
            assert "replicated" in await _names(client)
            assert _reads("replica") > before  # the list and its jobs' last runs

            # Replay paused: the replica lags behind a new job, but within 30 s it still
            # serves the list (bounded staleness, not read-your-writes)...
            await standby.execute("SELECT pg_wal_replay_pause()")
            fresh = await client.post("/v1/jobs", json=spec("fresh"))
            assert fresh.status_code == 201, fresh.text
            assert "fresh" not in await _names(client)
            # ...while a single job, and every write with what it reads first, are the
            # primary's: a trigger reads its new run back (list_runs, a routed read).
            job_id = fresh.json()["id"]
            assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
            triggered = await client.post(f"/v1/jobs/{job_id}/trigger")
            assert triggered.status_code == 201, triggered.text
            assert triggered.json()["job_id"] == job_id

            # Past the bound, the primary serves the lists: fresh data visible.
            router.max_lag = 0.5
            lagging = _reads("primary_lagging")

            async def listed() -> bool:
                return "fresh" in await _names(client)

            await _until("the lagging replica is left for the primary", listed)
            assert _reads("primary_lagging") > lagging
            assert router.lag is not None and router.lag > 0.5

            # Replay resumed: the replica is back in service once it caught up.
            await standby.execute("SELECT pg_wal_replay_resume()")
            back = _reads("replica")

            async def served_by_replica() -> bool:
                return "fresh" in await _names(client) and _reads("replica") > back

            await _until("the caught-up replica serves again", served_by_replica)
    finally:
        await standby.close()


async def test_the_lag_is_measured_at_most_once_per_interval_of_the_injected_clock(
    pair: Pair, stores: tuple[PostgresStore, ReplicaReads]
) -> None:
    primary, _ = stores
    clock = FrozenClock(datetime.now(UTC))
    router = await ReplicaReads.open(
        primary, pair.standby, max_lag=0.3, check_every=1.0, clock=clock
    )
    app = create_app(router, auth=AuthConfig(admin_token=ADMIN_TOKEN), clock=clock)
    standby = await asyncpg.connect(pair.standby)
    try:
        async with connect(app, ADMIN_TOKEN) as client:
            await _until("the standby replays everything", lambda: _replayed(standby, primary))
            await _names(client)
            assert router.served_by == "replica"
            await standby.execute("SELECT pg_wal_replay_pause()")
            created = await client.post("/v1/jobs", json=spec("unseen"))
            assert created.status_code == 201, created.text

            async def behind() -> bool:
                lag: float = await standby.fetchval(
                    "SELECT extract(epoch FROM now() - pg_last_xact_replay_timestamp())"
                )
                return lag > 0.5

            await _until("the paused standby is past the bound", behind)
            # The clock has not moved: the last measure stands, the replica serves.
            assert "unseen" not in await _names(client)
            clock.advance(1.0)
            assert "unseen" in await _names(client)
            assert router.served_by == "primary_lagging"
    finally:
        await standby.execute("SELECT pg_wal_replay_resume()")
        await standby.close()
        await router.replica.close()  # the primary is the fixture's


async def test_the_standby_measures_its_lag_and_the_primary_is_not_a_standby(
    pair: Pair, stores: tuple[PostgresStore, ReplicaReads]
) -> None:
    primary, router = stores
    await primary.create_tenant(Tenant("measured", "measured", datetime.now(UTC)))
    position = await primary.wal_position()

    async def caught_up() -> bool:
        return await router.replica.replay_lag(position) == 0.0

    await _until("the standby replays up to the primary's position", caught_up)
    assert await primary.replay_lag(position) is None  # not a standby: not measurable
    # Opened read-only: a write that reached the replica's store by mistake fails.
    with pytest.raises(asyncpg.exceptions.ReadOnlySQLTransactionError):
        await router.replica.create_tenant(Tenant("nowhere", "nowhere", datetime.now(UTC)))


def test_cronwheel_api_reads_its_lists_from_the_replica(pair: Pair, tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "api.log"
    url = f"http://127.0.0.1:{port}"
    args = ("api", "--db", pair.primary, "--port", str(port), "--admin-token", ADMIN_TOKEN)
    env = {"CRONWHEEL_READ_REPLICA_URL": pair.standby}
    with cronwheel(*args, "--max-replica-lag", "10", env=env, log=log) as proc:
        wait_until_up(url, proc, log)
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        created = httpx.post(f"{url}/v1/jobs", json=spec("through-the-cli"), headers=auth)
        assert created.status_code == 201, created.text
        deadline = time.monotonic() + TIMEOUT
        while True:
            listed = httpx.get(f"{url}/v1/jobs", headers=auth, params={"limit": 100})
            assert listed.status_code == 200, listed.text
            if "through-the-cli" in {j["name"] for j in listed.json()["items"]}:
                break
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        scraped = httpx.get(f"{url}/metrics", headers=auth).text
        served = [
            line
            for line in scraped.splitlines()
            if line.startswith('cronwheel_replica_reads_total{served_by="replica"}')
        ]
        assert served and float(served[0].split()[-1]) > 0, scraped
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()
    assert "lists and history from postgresql://postgres@127.0.0.1:" in log.read_text()


async def test_a_stopped_replica_leaves_lists_to_the_primary(
    pair: Pair, stores: tuple[PostgresStore, ReplicaReads]
) -> None:
    _, router = stores
    app = create_app(router, auth=AuthConfig(admin_token=ADMIN_TOKEN))
    async with connect(app, ADMIN_TOKEN) as client:
        created = await client.post("/v1/jobs", json=spec("kept"))
        assert created.status_code == 201, created.text
        await asyncio.to_thread(pair.stop_standby)
        unreachable = _reads("primary_unreachable")
        assert "kept" in await _names(client)
        assert _reads("primary_unreachable") > unreachable
        assert router.served_by == "primary_unreachable"
        runs = await client.get(f"/v1/jobs/{created.json()['id']}/runs")
        assert runs.status_code == 200, runs.text
    # An API opened while its replica is down starts, and answers from the primary.
    later = await ReplicaReads.open(router.primary, pair.standby, check_every=0.1)
    try:
        async with connect(
            create_app(later, auth=AuthConfig(admin_token=ADMIN_TOKEN)), ADMIN_TOKEN
        ) as client:
            assert "kept" in await _names(client)
        assert later.served_by == "primary_unreachable"
    finally:
        await later.replica.close()  # the primary is the fixture's


def test_routed_reads_are_store_methods_and_everything_else_reaches_the_primary() -> None:
    assert ROUTED.issubset(Store.__abstractmethods__)
    # Routed by type: exactly the History seam's reads, the lists a replica may serve.
    assert {
        "list_jobs", "last_runs", "list_runs", "list_dead", "list_attempts", "list_activity",
        "list_audit", "attempt_history", "runs_around", "list_pipelines",
        "list_pipeline_versions", "list_pipeline_runs", "list_notifications",
    } == ROUTED  # fmt: skip
    assert not ReplicaReads.__abstractmethods__
    # Never routed: what authentication, idempotency and writes read.
    assert not {"find_api_key", "get_tenant", "list_api_keys", "get_response"} & ROUTED
    assert not {"get_job", "get_run"} & ROUTED


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--db", "sqlite:///x.db", "--read-replica", "postgresql://r@127.0.0.1/db"],
            "--read-replica needs a PostgreSQL store",
        ),
        (
            ["--db", "postgresql://p@127.0.0.1/db", "--read-replica", "replica.db"],
            "is not a PostgreSQL URL",
        ),
    ],
)
def test_a_replica_that_cannot_work_is_refused(
    args: list[str], message: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(api, [*args, "--no-auth"], catch_exceptions=False)
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "x.db").exists()
