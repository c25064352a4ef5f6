"""``cronwheel pipelines run | runs | get-run | cancel | retry`` (in the test process:
tests/e2e/clirun.py) against a real ``cronwheel api``, on each store: a remote worker
(over HTTP) moves the tasks on; the run shows as a tree on an 80-column terminal and one
line per task in a pipe."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

# The fixtures: one `cronwheel api` for this file, its store put back before each test
# (tests/e2e/apiserver.py).
from tests.e2e.apiserver import api_store, api_url_per_module, shared_api  # noqa: F401
from tests.e2e.procs import REPO, wait_until
from tests.e2e.test_cli import TOKEN, cli
from tests.e2e.test_cli_views import ok, on_terminal, piped

AUTH = {"Authorization": f"Bearer {TOKEN}"}
POOL = "cli-pipelines"
# report waits for extract and for load: it sits under load, "also after: extract".
ETL = {
    "tasks": {
        t: {"action": {"type": "handler", "name": t}, "pool": POOL}
        for t in ("extract", "load", "report")
    },
    "edges": [
        {"from": "extract", "to": "load"},
        {"from": "extract", "to": "report"},
        {"from": "load", "to": "report"},
    ],
}


def _finish(url: str, task_run_id: int, outcome: str) -> None:
    """Be a remote worker for one attempt of a task's run: claim it, report ``outcome``."""
    claim = httpx.post(
        f"{url}/v1/workers/claim", json={"worker_id": "w-cli", "pools": [POOL]}, headers=AUTH
    )
    assert claim.status_code == 200, claim.text
    [claimed] = claim.json()["runs"]
    assert claimed["run"]["id"] == task_run_id
    body: dict[str, Any] = {"worker_id": "w-cli", "fence": claimed["run"]["fence"]}
    body["outcome"] = outcome
    if outcome != "succeeded":
        body |= {"error_class": "ValueError", "error_message": "the file is corrupt"}
    done = httpx.post(f"{url}/v1/runs/{task_run_id}/complete", json=body, headers=AUTH)
    assert done.status_code == 200, done.text


def _task_run(run: dict[str, Any], task: str) -> int:
    [row] = [t for t in run["tasks"] if t["task"] == task]
    return int(row["run_id"])


def _read(url: str, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(ok(cli(url, "pipelines", "get-run", run_id, "--json")))
    return found


def test_a_pipeline_run_from_start_to_retry_in_the_terminal(api_url: str, tmp_path: Path) -> None:
    definition = tmp_path / "etl.json"
    definition.write_text(json.dumps(ETL))
    ok(cli(api_url, "pipelines", "create", "--file", str(definition), "--name", "cli-etl"))
    started = json.loads(
        ok(cli(api_url, "pipelines", "run", "cli-etl", "--idempotency-key", "k-1", "--json"))
    )
    assert started["state"] == "running"
    assert [(t["task"], t["run_state"]) for t in started["tasks"]] == [("extract", "pending")]
    again = cli(api_url, "pipelines", "run", "cli-etl", "--idempotency-key", "k-1", "--json")
    assert json.loads(ok(again))["id"] == started["id"]
    run_id = started["id"]

    # As started: the root is pending, the rest waits.
    code, screen = on_terminal(api_url, "pipelines", "get-run", run_id)
    assert code == 0, screen
    assert f"pipeline run:    {run_id}" in screen
    assert "pipeline:        cli-etl (version 1)" in screen
    extract = _task_run(started, "extract")
    assert f"extract  pending  run {extract}\n└─ load  waiting\n   └─ report  waiting" in screen

    _finish(api_url, extract, "succeeded")
    load = _task_run(_read(api_url, run_id), "load")
    _finish(api_url, load, "permanent")
    failed = _read(api_url, run_id)
    assert failed["state"] == "failed"

    code, screen = on_terminal(api_url, "pipelines", "get-run", run_id)
    assert code == 0, screen
    assert max(len(line) for line in screen.splitlines()) <= 80
    assert "state:           failed" in screen
    assert "tasks:           3: 1 succeeded, 1 dead, 1 skipped" in screen
    tree = screen[screen.index("\n\n") + 2 :].splitlines()
    assert tree == [
        f"extract  succeeded  run {extract}",
        f"└─ load  dead  run {load}",
        "   └─ report  skipped (upstream_failed)",
        "         also after: extract",
    ]
    # In a pipe: the same tree, each task on one whole line.
    lines = ok(piped(api_url, "pipelines", "get-run", run_id)).splitlines()
    assert lines[-3:] == [
        f"extract  succeeded  run {extract}",
        f"└─ load  dead  run {load}",
        "   └─ report  skipped (upstream_failed)  also after: extract",
    ]

    # The list: a table on the terminal, tab-separated values in a pipe, a filter by state.
    second = json.loads(ok(cli(api_url, "pipelines", "run", "cli-etl", "--json")))
    code, screen = on_terminal(api_url, "pipelines", "runs", "cli-etl")
    assert code == 0, screen
    assert max(len(line) for line in screen.splitlines()) <= 80
    assert run_id in screen and second["id"] in screen and "…" not in screen
    assert re.search(rf"{run_id}\s+failed\s+{re.escape(started['created_at'])}", screen), screen
    header, *rows = ok(piped(api_url, "pipelines", "runs")).splitlines()
    assert header.split("\t") == ["id", "state", "started", "version", "finished", "pipeline_id"]
    assert [r.split("\t")[:2] for r in rows] == [[second["id"], "running"], [run_id, "failed"]]
    assert rows[1].split("\t")[2] == started["created_at"]
    assert rows[1].split("\t")[5] == started["pipeline_id"]
    only_failed = json.loads(ok(cli(api_url, "pipelines", "runs", "--state", "failed", "--json")))
    assert [r["id"] for r in only_failed["items"]] == [run_id]

    # Retry the dead task: it runs again, and report waits for it again.
    retried = ok(cli(api_url, "pipelines", "retry", run_id, "load"))
    assert "state:           running" in retried
    assert f"└─ load  pending  run {load}" in retried
    assert "   └─ report  waiting  also after: extract" in retried  # a pipe: one line
    refused = cli(api_url, "pipelines", "retry", run_id, "extract")
    assert refused.returncode == 4 and "not dead" in refused.stderr and "(task)" in refused.stderr
    unknown = cli(api_url, "pipelines", "retry", run_id, "nope")
    assert unknown.returncode == 3 and "nope" in unknown.stderr

    # Cancel: the pending task is cancelled, what waited for it skipped; again: the same.
    cancelled = ok(cli(api_url, "pipelines", "cancel", run_id))
    assert "state:           cancelled" in cancelled
    assert f"└─ load  cancelled  run {load}" in cancelled
    assert ok(cli(api_url, "pipelines", "cancel", run_id)) == cancelled
    ok(cli(api_url, "pipelines", "cancel", second["id"]))


def test_bad_input_is_a_message_and_an_exit_code(api_url: str) -> None:
    for args in (("get-run", "nope"), ("cancel", "12"), ("retry", "x", "load")):
        result = cli(api_url, "pipelines", *args)
        assert result.returncode == 2, result.stderr
        assert "is not a pipeline run id" in result.stderr and "Traceback" not in result.stderr
    missing = cli(api_url, "pipelines", "get-run", "01a1ff91-f97e-7000-8a6d-746a4710197a")
    assert missing.returncode == 3 and "01a1ff91-f97e-7000-8a6d-746a4710197a" in missing.stderr
    assert cli(api_url, "pipelines", "run", "no-such-pipeline").returncode == 3
    assert cli(api_url, "pipelines", "runs", "no-such-pipeline").returncode == 3
    bad_state = cli(api_url, "pipelines", "runs", "--state", "done")
    assert bad_state.returncode == 2 and "--state" in bad_state.stderr


def test_run_wait_ends_with_the_run_and_says_how_it_ended(api_url: str, tmp_path: Path) -> None:
    definition = tmp_path / "one.json"
    definition.write_text(json.dumps({"tasks": {"only": ETL["tasks"]["extract"]}}))  # type: ignore[index]
    ok(cli(api_url, "pipelines", "create", "--file", str(definition), "--name", "cli-wait"))
    env = {"CRONWHEEL_URL": api_url, "CRONWHEEL_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    waiting = subprocess.Popen(
        [sys.executable, "-m", "cronwheel", "pipelines", "run", "cli-wait", "--wait"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        runs = wait_until(
            "the waited-for run has started",
            lambda: httpx.get(f"{api_url}/v1/pipeline-runs", headers=AUTH).json()["items"],
            30,
            [],
        )
        httpx.post(f"{api_url}/v1/pipeline-runs/{runs[0]['id']}/cancel", headers=AUTH)
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 1, err
    assert "state:           cancelled" in out and "only  cancelled" in out
