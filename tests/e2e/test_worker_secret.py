"""A real `cronwheel worker` without CRONWHEEL_WEBHOOK_SECRET says, once, that targets
cannot check its signatures; with the secret it says nothing of it, and never prints it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.procs import REPO

WARNING = "CRONWHEEL_WEBHOOK_SECRET is not set"


def _worker_output(tmp_path: Path, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "CRONWHEEL_WEBHOOK_SECRET"}
    done = subprocess.run(
        # --duration: the worker stops by itself, after several heartbeats and claims.
        [sys.executable, "-m", "cronwheel", "worker", "--pool", "default", "--duration", "3"],
        cwd=REPO,
        env={
            **clean,
            "PYTHONPATH": str(REPO),
            "CRONWHEEL_DB": f"sqlite:///{tmp_path / 'cw.db'}",
            **env,
        },
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b""  # logs go to stderr
    return done.stderr.decode()


def test_a_worker_without_a_webhook_secret_warns_once(tmp_path: Path) -> None:
    err = _worker_output(tmp_path)
    assert err.count(WARNING) == 1, err
    [line] = [line for line in err.splitlines() if WARNING in line]
    assert "WARNING" in line and "cannot check" in line


def test_a_worker_with_a_webhook_secret_does_not_warn_nor_show_it(tmp_path: Path) -> None:
    secret = "whsec-e2e-0f9c1d"
    err = _worker_output(tmp_path, CRONWHEEL_WEBHOOK_SECRET=secret)
    assert WARNING not in err and secret not in err
