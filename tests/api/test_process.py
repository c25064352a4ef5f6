"""``cronwheel api`` as a real process: serves, authenticates, and stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.api.helpers import ADMIN_TOKEN, spec
from tests.e2e.procs import REPO, cronwheel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"cronwheel api did not answer: {log.read_text()}")


def test_api_process_serves_and_stops_on_sigterm(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "api.log"
    url = f"http://127.0.0.1:{port}"
    db = f"sqlite:///{tmp_path / 'api.db'}"
    args = ("api", "--db", db, "--port", str(port), "--admin-token", ADMIN_TOKEN)
    with cronwheel(*args, log=log) as proc:
        wait_until_up(url, proc, log)
        assert httpx.get(f"{url}/readyz").json() == {"status": "ready"}
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        created = httpx.post(f"{url}/v1/jobs", json=spec("from-outside"), headers=auth)
        assert created.status_code == 201, created.text
        assert (
            httpx.get(f"{url}/v1/jobs", headers=auth).json()["items"][0]["name"] == "from-outside"
        )
        assert httpx.get(f"{url}/v1/jobs").status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, log.read_text()


def test_no_auth_is_refused_off_loopback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cronwheel", "api", "--no-auth", "--host", "0.0.0.0"],
        cwd=REPO,
        capture_output=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert b"--no-auth is refused" in result.stderr
