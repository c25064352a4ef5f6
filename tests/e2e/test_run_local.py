"""examples/cluster/run-local.sh supervises its processes, so docs/cluster.md's kill
experiment works as written (issue 29 item 11, decision 0046): a worker SIGKILLed is
logged and started again while the six others keep running and running jobs, and
SIGTERM to the script stops every process it started."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cluster import test_quickstart
from tests.e2e.procs import free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "cluster" / "run-local.sh"
TOKEN = "run-local-test-admin-token"
NAMES = ("api1", "api2", "scheduler1", "scheduler2", "worker1", "worker2", "worker3")
STARTED = re.compile(r"^(\w+): pid (\d+) \(log ", re.M)
HELLO = re.compile(r"hello, cluster: run \d+ due [\d:]+, attempt \d+, in worker pid (\d+)")
TIMEOUT = 90.0
"""Seconds any wait may take on a busy machine before it fails (it takes 1 to 10)."""

fresh_db = test_quickstart.fresh_db  # the fixture: a database that does not exist yet


def _started(out: Path) -> dict[str, list[int]]:
    """Each process's pids, in the order the script started them."""
    found: dict[str, list[int]] = {}
    for name, pid in STARTED.findall(out.read_text()):
        found.setdefault(name, []).append(int(pid))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _hellos(log: Path) -> list[int]:
    """The worker pids the handler printed in ``log``, one per run it ran."""
    return [int(pid) for pid in HELLO.findall(log.read_text())]


def _workers(api: httpx.Client) -> list[str]:
    items: list[dict[str, Any]] = api.get("/v1/workers").json()["items"]
    return [w["id"] for w in items if w["shared"]]


@pytest.mark.timeout(240)
def test_a_killed_worker_is_started_again_and_sigterm_stops_all(
    fresh_db: tuple[str, str], tmp_path: Path
) -> None:
    _, dsn = fresh_db
    ports = {f"CRONWHEEL_{n.upper()}_METRICS_PORT": str(free_port()) for n in NAMES[2:]}
    api_port = free_port()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CRONWHEEL_DB": dsn,
        "CRONWHEEL_ADMIN_TOKEN": TOKEN,
        "CRONWHEEL_API1_PORT": str(api_port),
        "CRONWHEEL_API2_PORT": str(free_port()),
        "LOGS": str(tmp_path / "logs"),
        **ports,
    }
    for key in ("CRONWHEEL_URL", "CRONWHEEL_TOKEN", "PYTHONPATH", "RESTART_DELAY"):
        env.pop(key, None)
    out, logs = tmp_path / "run-local.out", tmp_path / "logs"
    every = [out, *(logs / f"{name}.log" for name in NAMES)]
    begun = time.monotonic()
    with open(out, "wb") as stdout:
        script = subprocess.Popen(
            ["bash", str(SCRIPT)],
            cwd=REPO,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: found whole at the end
        )
    api = httpx.Client(
        base_url=f"http://127.0.0.1:{api_port}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        started = wait_until(
            "the script starts its 7 processes",
            lambda: (s := _started(out)) and set(s) == set(NAMES) and s,
            TIMEOUT,
            every,
        )
        wait_until("the 3 workers heartbeat", lambda: len(_workers(api)) == 3, TIMEOUT, every[:1])
        job = {
            "name": "hello",
            "schedule": {"kind": "cron", "cron": "* * * * * *", "timezone": "UTC"},
            "action": {"type": "handler", "name": "hello"},
            "payload": {"who": "cluster"},
        }
        created = api.post("/v1/jobs", json=job)
        assert created.status_code == 201, created.text
        worker_logs = [logs / f"worker{i}.log" for i in (1, 2, 3)]
        wait_until(
            "a worker runs the job",
            lambda: any(_hellos(log) for log in worker_logs),
            TIMEOUT,
            every,
        )

        [killed] = started["worker2"]
        os.kill(killed, signal.SIGKILL)
        before = [len(_hellos(log)) for log in worker_logs]
        others = [pid for name in NAMES if name != "worker2" for pid in started[name]]
        # The six others keep running, and running the job.
        wait_until(
            "worker1 and worker3 run the job after the kill",
            lambda: all(len(_hellos(worker_logs[i])) > before[i] for i in (0, 2)),
            TIMEOUT,
            every,
        )
        assert all(_alive(pid) for pid in others), out.read_text()
        # worker2 is logged dead and started again: a new process that heartbeats.
        restarted = wait_until(
            "worker2 is started again",
            lambda: len(s := _started(out)["worker2"]) == 2 and s[1],
            TIMEOUT,
            every,
        )
        text = out.read_text()
        assert f"worker2: pid {killed} exited on its own (killed by SIGKILL)" in text, text
        assert _alive(restarted) and restarted != killed
        wait_until(
            "the new worker2 heartbeats",
            lambda: any(f"-{restarted}-" in w for w in _workers(api)),
            TIMEOUT,
            every,
        )
        assert all(_alive(pid) for pid in others), out.read_text()
        assert _started(out) == {**started, "worker2": [killed, restarted]}
        print(f"\nrun-local.sh: started, killed and restarted in {time.monotonic() - begun:.1f} s")

        # SIGTERM to the script alone (as systemd or a terminal's kill would send it).
        stop_at = time.monotonic()
        script.send_signal(signal.SIGTERM)
        assert script.wait(timeout=TIMEOUT) == 0, out.read_text()
        took = time.monotonic() - stop_at
        print(f"run-local.sh: every process stopped {took:.1f} s after SIGTERM")
    finally:
        api.close()
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait(timeout=10)
    text = out.read_text()
    for name, pids in _started(out).items():
        assert f"{name}: pid {pids[-1]} stopped" in text, text
        assert not any(_alive(pid) for pid in pids), (name, pids)
    with pytest.raises(ProcessLookupError):  # nothing is left of its process group
        os.killpg(script.pid, 0)
    assert "Traceback" not in "".join(p.read_text() for p in every)
