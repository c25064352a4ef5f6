"""With ``--log-format json`` every line a scheduler or a worker writes on stderr is a
JSON object, the line saying where ``--metrics-port`` serves included (issue 29, item 6):
real processes on one SQLite store, stopped with SIGTERM."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx
import pytest

from tests.e2e.procs import cronwheel, free_port, wait_until

APP = "tests.e2e.metrics_app:worker"


@pytest.mark.parametrize("service", ["worker", "scheduler"])
def test_the_metrics_line_is_json_under_log_format_json(service: str, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'e2e.db'}"
    port, out, err = free_port(), tmp_path / "out.log", tmp_path / "err.log"
    args = [service, "--db", db, "--log-format", "json", "--metrics-port", str(port)]
    args += ["--app", APP] if service == "worker" else ["--shards", "4"]
    with cronwheel(*args, log=out, stderr=err) as proc:
        url = f"http://127.0.0.1:{port}/metrics"
        wait_until("metrics answer", lambda: httpx.get(url, timeout=1).is_success, 60, [out, err])
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, err.read_text()
    lines = [line for line in err.read_text().splitlines() if line.strip()]
    assert lines, "nothing on stderr"
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line on stderr: {line!r}", pytrace=False)
    said = [r for r in records if r.get("message") == f"metrics on {url}"]
    assert len(said) == 1, records
    assert said[0]["level"] == "info" and said[0]["logger"] == "cronwheel.cli", said[0]
    assert out.read_text() == ""  # stdout: nothing
