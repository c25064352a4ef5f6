"""A PostgreSQL primary and a streaming standby of its own, on this machine, for the
failover test (tests/cluster/test_pg_failover.py) and its benchmark (bench/failover.py).

Each instance is a data directory in a temporary folder owned by the ``postgres`` OS user
(initdb and postgres refuse to run as root), listening on 127.0.0.1 on a free port, with
its socket in that folder: the machine's own PostgreSQL (5432) is never touched. The
standby is a ``pg_basebackup`` of the primary, streaming from it, and with ``sync`` it is
the primary's synchronous standby (``synchronous_standby_names``, ``synchronous_commit =
on``): a commit returns once the standby has flushed it. :func:`ha_pair` tears both down
(immediate stop, folder removed) whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from tests.e2e.procs import free_port

BIN = Path(os.environ.get("CRONWHEEL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
OS_USER = "postgres"
STANDBY_NAME = "standby1"
START_TIMEOUT = 120
"""Seconds pg_ctl waits for a server to start or be promoted (a loaded machine is slow)."""

# Small, and quick to notice a dead peer: the standby reconnects to a primary at once,
# and a primary notices a dead standby (and its waiting commits) within seconds.
_COMMON = """
listen_addresses = '127.0.0.1'
unix_socket_directories = '{sockets}'
max_connections = 120
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 5
max_replication_slots = 5
hot_standby = on
wal_receiver_status_interval = 1s
wal_sender_timeout = 5s
wal_receiver_timeout = 5s
wal_retrieve_retry_interval = 1s
logging_collector = off
"""


def available() -> str | None:
    """None if this machine can run the pair, else why not."""
    if os.geteuid() != 0:
        return "the failover test runs PostgreSQL as the postgres OS user: run it as root"
    for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
        if not (BIN / tool).exists():
            return f"{BIN / tool} not found (set CRONWHEEL_TEST_PG_BIN to PostgreSQL's bin folder)"
    if shutil.which("runuser") is None:
        return "runuser not found"
    return None


def _as_postgres(*args: str | Path | int, timeout: float = START_TIMEOUT) -> None:
    command = ["runuser", "-u", OS_USER, "--", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")


@dataclass
class Instance:
    """One PostgreSQL server of the pair."""

    name: str
    folder: Path
    port: int

    @property
    def data(self) -> Path:
        return self.folder / self.name

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@{self.host}/{database}"

    def start(self) -> None:
        _as_postgres(
            BIN / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", START_TIMEOUT, "start"
        )

    def kill(self) -> None:
        """An immediate shutdown: every backend dies at once, no checkpoint, as in a crash
        of the server (what was committed is in the WAL; what was not is gone)."""
        _as_postgres(BIN / "pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")

    def crash(self) -> None:
        """SIGKILL the postmaster and every process of the server at once, as when its
        machine dies: nothing more is sent to a standby, whatever it was doing."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = _children(postmaster)
        for pid in [postmaster, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def promote(self) -> None:
        """End recovery: a standby becomes a primary, and takes writes."""
        _as_postgres(BIN / "pg_ctl", "-D", self.data, "-w", "-t", START_TIMEOUT, "promote")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def configure(self, text: str) -> None:
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            conf.write(text)

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


@dataclass
class Pair:
    primary: Instance
    standby: Instance
    sync: bool

    def dsn(self, database: str, attrs: str = "read-write") -> str:
        """The multi-host URL every cronwheel process is given (libpq's form)."""
        hosts = f"{self.primary.host},{self.standby.host}"
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs={attrs}"


@contextlib.contextmanager
def ha_pair(*, sync: bool) -> Iterator[Pair]:
    """A running primary and its streaming standby (synchronous with ``sync``), stopped
    and removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix="cronwheel-ha-"))
    shutil.chown(folder, OS_USER, OS_USER)
    folder.chmod(0o700)
    primary = Instance("primary", folder, free_port())
    standby = Instance("standby", folder, free_port())
    try:
        _init_primary(primary, sync=sync)
        primary.start()
        _as_postgres(
            BIN / "pg_basebackup",
            "-h", "127.0.0.1", "-p", primary.port, "-U", "postgres",
            "-D", standby.data, "-X", "stream", "-R", "--no-sync",
        )  # fmt: skip
        # The standby has the primary's settings; its own come last and win. It names
        # itself to the primary (synchronous_standby_names) and, once promoted, waits for
        # no standby of its own: a commit would hang until one came.
        conninfo = (
            f"host=127.0.0.1 port={primary.port} user=postgres application_name={STANDBY_NAME}"
        )
        standby.configure(
            f"port = {standby.port}\nprimary_conninfo = '{conninfo}'\n"
            "synchronous_standby_names = ''\n"
        )
        standby.start()
        yield Pair(primary, standby, sync)
    finally:
        for instance in (standby, primary):
            if instance.running():
                with contextlib.suppress(Exception):
                    instance.kill()
        shutil.rmtree(folder, ignore_errors=True)


def _init_primary(primary: Instance, *, sync: bool) -> None:
    _as_postgres(
        BIN / "initdb", "-D", primary.data, "-U", "postgres", "--auth=trust",
        "-E", "UTF8", "--locale=C", "--no-sync",
    )  # fmt: skip
    settings = _COMMON.format(sockets=primary.folder) + f"port = {primary.port}\n"
    if sync:
        settings += f"synchronous_standby_names = '{STANDBY_NAME}'\nsynchronous_commit = on\n"
    primary.configure(settings)


async def wait_streaming(pair: Pair, timeout: float = START_TIMEOUT) -> str:
    """Wait until the standby streams from the primary (and, with ``sync``, is its
    synchronous standby); return its ``sync_state``."""
    want = "sync" if pair.sync else "async"
    deadline = time.monotonic() + timeout
    found = None
    while time.monotonic() < deadline:
        conn = await asyncpg.connect(pair.primary.dsn(), timeout=10)
        try:
            found = await conn.fetchval(
                "SELECT sync_state FROM pg_stat_replication"
                " WHERE application_name = $1 AND state = 'streaming'",
                STANDBY_NAME,
            )
        finally:
            await conn.close()
        if found == want:
            return want
        await asyncio.sleep(0.2)  # the standby connects on its own: poll until it has
    raise TimeoutError(f"the standby is not streaming ({found}):\n{pair.standby.output()}")


async def walsender_pid(pair: Pair) -> int:
    """The primary's process streaming to the standby."""
    conn = await asyncpg.connect(pair.primary.dsn(), timeout=10)
    try:
        pid: int = await conn.fetchval(
            "SELECT pid FROM pg_stat_replication WHERE application_name = $1", STANDBY_NAME
        )
    finally:
        await conn.close()
    return pid
