"""Structured logs of real processes: with ``--log-format json`` every stderr line is a
JSON object, an attempt's end carries its run's ids (checked against the API), a failure
its error, uvicorn's lines have the same shape, a handler's own line carries the run's
ids, and no secret given to the process appears; text stays one line per record;
``--log-level warning`` silences the attempt-end info lines."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.procs import REPO, free_port, wait_until
from tests.e2e.procs import cronwheel as cronwheel_proc

ADMIN_TOKEN = "admin-" + uuid.uuid4().hex
WEBHOOK_SECRET = "whsec-" + uuid.uuid4().hex
RUN_FIELDS = ("run_id", "job_id", "tenant", "attempt", "fence", "pool")


@contextmanager
def dev(
    tmp_path: Path, db: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[httpx.Client, Path, list[Path]]]:
    """``cronwheel dev`` with the test handlers, its stdout and stderr in two files; stopped
    with SIGTERM at the end of the block."""
    port = free_port()
    out, err = tmp_path / "dev.out", tmp_path / "dev.err"
    env = {
        "CRONWHEEL_ADMIN_TOKEN": ADMIN_TOKEN,
        "CRONWHEEL_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "CRONWHEEL_TEST_MARKS": str(tmp_path / "marks"),
        **(env or {}),
    }
    command = ["dev", "--db", db, "--app", "tests.e2e.app:worker", "--port", str(port), *args]
    with cronwheel_proc(*command, env=env, log=out, stderr=err) as proc:
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        wait_until("the API answers", lambda: client.get("/readyz").is_success, 60, [out, err])
        yield client, err, [out, err]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, err.read_text()


def _job(client: httpx.Client, name: str, handler: str) -> str:
    created = client.post(
        "/v1/jobs",
        json={
            "name": name,
            "schedule": {"kind": "immediate"},
            "action": {"type": "handler", "name": handler},
            "retry": {"max_attempts": 2, "backoff": "fixed", "initial_delay": 0.2},
        },
    )
    assert created.status_code == 201, created.text
    job_id: str = created.json()["id"]
    return job_id


def _finished_run(client: httpx.Client, job_id: str, logs: list[Path]) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        runs = client.get(f"/v1/jobs/{job_id}/runs").json()["items"]
        if runs and runs[0]["state"] == "succeeded":
            detail: dict[str, Any] = client.get(f"/v1/runs/{runs[0]['id']}").json()
            return detail
        return None

    found: dict[str, Any] = wait_until(f"job {job_id}'s run succeeds", done, 60, logs)
    return found


def _ids(line: dict[str, Any]) -> dict[str, Any]:
    return {k: line.get(k) for k in RUN_FIELDS}


def _expected(run: dict[str, Any], attempt: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run["id"],
        "job_id": run["job_id"],
        "tenant": run["tenant_id"],
        "attempt": attempt["attempt"],
        "fence": attempt["fence"],
        "pool": run["pool"],
    }


@pytest.mark.timeout(150)
def test_json_lines_carry_the_runs_ids_and_errors(store_url: str, tmp_path: Path) -> None:
    args = ["--log-format", "json", "--log-level", "info", "--access-log"]
    with dev(tmp_path, store_url, *args) as (client, err, logs):
        quiet = _finished_run(client, _job(client, "says-hello", "logs-a-line"), logs)
        flaky = _finished_run(client, _job(client, "fails-then-works", "fails-once"), logs)
    text = err.read_text()
    lines = [json.loads(line) for line in text.splitlines()]  # every line parses
    for line in lines:
        assert {"ts", "level", "logger", "message"} <= line.keys(), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["ts"]), line

    ends = [line for line in lines if line["logger"] == "cronwheel.attempts"]
    [hello_end] = [e for e in ends if e["run_id"] == quiet["id"]]
    assert hello_end["level"] == "info" and hello_end["outcome"] == "succeeded"
    assert _ids(hello_end) == _expected(quiet, quiet["attempts"][0])
    assert hello_end["job_name"] == "says-hello"
    assert hello_end["duration_seconds"] >= 0 and hello_end["lag_seconds"] >= 0

    # The handler's own line, from the thread it ran in, carries the run's ids.
    [own] = [line for line in lines if line["logger"] == "tests.e2e.app"]
    assert own["message"] == f"hello from the handler of run {quiet['id']}"
    assert _ids(own) == _expected(quiet, quiet["attempts"][0])

    # The failed first attempt: its ids, its error and the handler's traceback.
    first, second = sorted(flaky["attempts"], key=lambda a: a["attempt"])
    [failed] = [e for e in ends if e["run_id"] == flaky["id"] and e["attempt"] == 1]
    assert _ids(failed) == _expected(flaky, first)
    assert failed["level"] == "warning" and failed["outcome"] == "failed"
    assert failed["error_class"] == "RuntimeError"
    assert failed["error"] == first["error_message"]
    assert "the first attempt fails on purpose" in failed["error"]
    assert "Traceback" in failed["exception"] and "fails_once" in failed["exception"]
    [retried] = [e for e in ends if e["run_id"] == flaky["id"] and e["attempt"] == 2]
    assert _ids(retried) == _expected(flaky, second)
    assert retried["outcome"] == "succeeded"

    # uvicorn's lines, its access log included, in the same shape.
    served = [line for line in lines if line["logger"].startswith("uvicorn")]
    assert any(line["logger"] == "uvicorn.error" for line in served), served
    access = [line for line in served if line["logger"] == "uvicorn.access"]
    assert any(a["method"] == "POST" and a["path"] == "/v1/jobs" for a in access), access
    assert all(isinstance(a["status"], int) for a in access)

    everything = text + (tmp_path / "dev.out").read_text()
    assert ADMIN_TOKEN not in everything and WEBHOOK_SECRET not in everything


@pytest.mark.timeout(120)
def test_warning_silences_attempt_ends_and_text_is_one_line_each(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'logs.db'}"
    # Text format, warning level: the handler's own warning shows, the success does not.
    with dev(tmp_path, db, "--log-level", "warning") as (client, err, logs):
        run = _finished_run(client, _job(client, "says-hello", "logs-a-line"), logs)
        flaky = _finished_run(client, _job(client, "fails-then-works", "fails-once"), logs)
    lines = err.read_text().splitlines()
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: "
    for line in lines:
        assert re.match(stamp, line), line  # a traceback or a 2-line error stays on its line
    assert any(f"hello from the handler of run {run['id']}" in line for line in lines), lines
    ends = [line for line in lines if " cronwheel.attempts: " in line]
    assert not any(" INFO " in line for line in ends), ends
    # The failed attempt, a warning, still shows: on one line with its traceback.
    [failed] = ends
    assert f"run {flaky['id']} of job fails-then-works" in failed
    assert "\\nand a second line" in failed and "Traceback" in failed
    assert not any("uvicorn.access" in line for line in lines)  # off in dev by default


@pytest.mark.timeout(120)
def test_the_api_logs_json_and_its_access_log_at_info(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'api.db'}"
    port = free_port()
    err = tmp_path / "api.err"
    env = {"CRONWHEEL_LOG_FORMAT": "json", "CRONWHEEL_ADMIN_TOKEN": ADMIN_TOKEN}
    with cronwheel_proc("api", "--db", db, "--port", str(port), env=env, stderr=err) as proc:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}")
        wait_until("the API answers", lambda: client.get("/readyz").is_success, 60, [err])
        refused = client.get("/v1/jobs", headers={"Authorization": f"Bearer {ADMIN_TOKEN}x"})
        assert refused.status_code == 401
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, err.read_text()
    text = err.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert any(line["message"].startswith("cronwheel api on http://") for line in lines)
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    seen = [(a["method"], a["path"], a["status"]) for a in access]
    assert ("GET", "/readyz", 200) in seen and seen[-1] == ("GET", "/v1/jobs", 401), seen
    assert ADMIN_TOKEN not in text


@pytest.mark.parametrize("command", ["worker", "scheduler", "api", "dev", "migrate"])
def test_the_error_that_stops_a_process_is_a_json_line(command: str) -> None:
    password = "pw-" + uuid.uuid4().hex
    db = f"postgresql://postgres:{password}@127.0.0.1:{free_port()}/nowhere"
    done = subprocess.run(
        [sys.executable, "-m", "cronwheel", command, "--db", db, "--log-format", "json"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "CRONWHEEL_LOG_LEVEL": "info"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 6, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert lines[-1]["level"] == "error" and lines[-1]["exit_code"] == 6, lines
    assert "cannot reach PostgreSQL" in lines[-1]["message"]
    assert password not in done.stderr + done.stdout
