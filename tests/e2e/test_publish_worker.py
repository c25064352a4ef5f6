"""A real `cronwheel worker --broker NAME=URL` publishes a job's run to the real Redis,
says which brokers it names (never their URLs), and never prints a broker's password,
even at debug level with a broker it cannot reach (issue 30 item 2)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import cronwheel
from tests.e2e.procs import REPO
from tests.engine.brokers import URLS, destination

PASSWORD = "e2e-broker-pw-7f3a"


async def test_a_worker_process_publishes_and_keeps_the_password_to_itself(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'cw.db'}"
    async with destination("redis") as dest:
        async with await cronwheel.connect(db) as cw:
            job = await cw.create(
                name="publish-e2e",
                schedule={"kind": "immediate"},
                action={"type": "publish", "broker": "events", "to": dest.to, "body": "hi"},
            )
            unreachable = await cw.create(
                name="publish-e2e-down",
                schedule={"kind": "immediate"},
                action={"type": "publish", "broker": "down", "to": "x"},
                retry={"max_attempts": 1},
                timeout_seconds=2,
            )
        args = ["worker", "--pool", "default", "--duration", "4", "--log-level", "debug"]
        args += ["--broker", f"events={URLS['redis']}"]
        args += ["--broker", f"down=nats://user:{PASSWORD}@127.0.0.1:9"]
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "cronwheel", *args],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "CRONWHEEL_DB": db},
            capture_output=True,
            timeout=120,
        )
        received = await dest.received()
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert "publish jobs may name the brokers events (redis), down (nats)" in err
    assert PASSWORD not in err and PASSWORD not in done.stdout.decode()
    assert [m.body for m in received] == [b"hi"]
    async with await cronwheel.connect(db) as cw:
        [run] = await cw.store.list_runs("default", job_id=job.id)
        [failed] = await cw.store.list_runs("default", job_id=unreachable.id)
    assert run.state.value == "succeeded"
    assert failed.state.value == "dead" and PASSWORD not in (failed.last_error or "")
