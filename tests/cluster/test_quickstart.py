"""The README's "Run a cluster" section, run as a user would run it: its shell blocks,
taken from README.md (so that the test breaks when the README drifts), on a database
that does not exist yet and on free ports, given through the environment as a user
who exported their own settings would."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import pg
from tests.cluster.conftest import drop_later
from tests.e2e.procs import free_port, wait_until

REPO = Path(__file__).resolve().parents[2]
MARK = (
    "<!-- docs-test: covered by"
    " tests/cluster/test_quickstart.py::test_readme_cluster_quickstart -->"
)
# It times nothing and shares nothing (its own database, free ports, its own process
# group): it runs in the parallel phase, beside other tests (decision 0038).
pytestmark = pytest.mark.beside_others
# What a user does once and this test's environment has done already: the virtualenv
# (the test runs in one, with honcho from the `test` extra) and installing honcho.
SETUP = (". .venv/bin/activate", "pip install honcho")


def readme_blocks() -> list[str]:
    """The shell blocks of README.md's "Run a cluster" section marked for this test."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Run a cluster\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(re.escape(MARK) + r"\n```sh\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 2, "the README's cluster section lost a block marked for this test"
    return blocks


def without_setup(block: str) -> str:
    """``block`` without the setup commands of SETUP; the rest is run as written."""
    lines = []
    for line in block.splitlines():
        commands = [c.strip() for c in line.split("&&")]
        kept = [c for c in commands if c not in SETUP]
        lines.append(" && ".join(kept))
    return "\n".join(lines) + "\n"


@pytest.fixture
def fresh_db(pg_dsn: str) -> Iterator[tuple[str, str]]:
    """The name and URL of a database that does not exist yet (the README creates it),
    dropped after the test (in the background)."""
    name = f"cronwheel_quickstart_{uuid.uuid4().hex[:12]}"
    try:
        yield name, pg._with_database(pg.DSN, name)
    finally:
        drop_later(name)


@pytest.mark.timeout(180)
def test_readme_cluster_quickstart(fresh_db: tuple[str, str], tmp_path: Path) -> None:
    assert shutil.which("honcho", path=str(Path(sys.executable).parent)), (
        "honcho is in the `test` extra"
    )
    start_block, job_block = (without_setup(b) for b in readme_blocks())
    _, dsn = fresh_db
    port1, port2 = free_port(), free_port()
    env = {
        **os.environ,
        # The virtualenv the test runs in, first: the `cronwheel` and `honcho` commands.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "CRONWHEEL_DB": dsn,
        "CRONWHEEL_API1_PORT": str(port1),
        "CRONWHEEL_API2_PORT": str(port2),
        # and the schedulers' and workers' --metrics-port, free ones too
        **{
            f"CRONWHEEL_{name}_METRICS_PORT": str(free_port())
            for name in ("SCHEDULER1", "SCHEDULER2", "WORKER1", "WORKER2", "WORKER3")
        },
    }
    for key in ("CRONWHEEL_URL", "CRONWHEEL_TOKEN", "CRONWHEEL_ADMIN_TOKEN", "PYTHONPATH"):
        env.pop(key, None)
    log = tmp_path / "cluster.log"
    with open(log, "wb") as out:
        cluster = subprocess.Popen(
            ["bash", "-e", "-c", start_block],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal would give it
        )
    try:
        for port in (port1, port2):
            wait_until(
                f"the API on port {port} answers",
                lambda p=port: httpx.get(f"http://127.0.0.1:{p}/readyz", timeout=2).is_success,
                90,
                [log],
            )
        created = subprocess.run(
            ["bash", "-e", "-c", job_block],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert created.returncode == 0, created.stdout + created.stderr

        # The job's runs, through the second API process, with the admin token of env.sh.
        token = subprocess.run(
            ["bash", "-c", ". examples/cluster/env.sh && echo $CRONWHEEL_ADMIN_TOKEN"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        api2 = httpx.Client(
            base_url=f"http://127.0.0.1:{port2}", headers={"Authorization": f"Bearer {token}"}
        )
        jobs = api2.get("/v1/jobs").json()["items"]
        assert [j["name"] for j in jobs] == ["hello"]

        def succeeded() -> bool:
            runs = api2.get(f"/v1/jobs/{jobs[0]['id']}/runs").json()["items"]
            return any(r["state"] == "succeeded" for r in runs)

        wait_until("a run of the job succeeds", succeeded, 60, [log])
        wait_until(
            "a worker says hello", lambda: "hello, cluster: run" in log.read_text(), 30, [log]
        )
    finally:
        # Ctrl-C in the terminal: SIGINT to the whole process group.
        if cluster.poll() is None:
            os.killpg(cluster.pid, signal.SIGINT)
        try:
            cluster.wait(timeout=45)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait(timeout=10)
            raise AssertionError(
                f"the cluster did not stop on SIGINT:\n{log.read_text()}"
            ) from None
    text = log.read_text()
    assert "Traceback" not in text, text
    assert re.search(r"worker\d\.1 stopped \(rc=0\)", text), text
