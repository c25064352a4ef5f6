"""Prometheus metrics read from a real scrape of real processes, after a scripted
scenario: successes, a retry, a dead letter, skips (paused, overlap), a webhook's 5xx."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.procs import cronwheel, free_port, wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
APP = "tests.e2e.metrics_app:worker"


def scrape(url: str) -> tuple[Samples, set[str]]:
    """Every sample of ``url``, by name and sorted labels, and the families it names.
    Parsing it with prometheus-client's own parser is part of the test."""
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    families = list(text_string_to_metric_families(response.text))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return samples, {f.name for f in families}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


@pytest.fixture
def failing_target() -> Iterator[str]:
    """A webhook target that answers 503 to everything."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _job(api: httpx.Client, name: str, action: dict[str, Any], **spec: Any) -> str:
    body = {"name": name, "schedule": {"kind": "manual"}, "action": action, **spec}
    response = api.post("/v1/jobs", json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def _enqueue(api: httpx.Client, job_id: str, n: int) -> None:
    response = api.post(f"/v1/jobs/{job_id}/runs", json={"payloads": [None] * n})
    assert response.status_code == 201, response.text


def _runs(api: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = api.get(f"/v1/jobs/{job_id}/runs?limit=500").json()["items"]
    return items


def test_a_scripted_scenario_shows_in_the_scrape_of_cronwheel_dev(
    store_url: str, tmp_path: Path, failing_target: str
) -> None:
    port = free_port()
    log = tmp_path / "dev.log"
    args = ["dev", "--db", store_url, "--app", APP, "--port", str(port)]
    args += ["--pool", "default", "--pool", "ticks"]
    base = f"http://127.0.0.1:{port}"
    with cronwheel(*args, log=log), httpx.Client(base_url=base, timeout=10) as api:
        wait_until("the API answers", lambda: api.get("/healthz").status_code == 200, 60, [log])
        handler = {"type": "handler"}
        ok = _job(api, "ok", handler | {"name": "ok"})
        _enqueue(api, ok, 3)
        fast_retry = {"max_attempts": 3, "backoff": "fixed", "initial_delay": 0.1}
        flaky = _job(api, "flaky", handler | {"name": "fails-once"}, retry=fast_retry)
        _enqueue(api, flaky, 1)
        broken = _job(api, "broken", handler | {"name": "broken"})
        _enqueue(api, broken, 1)
        hook = {"type": "webhook", "url": failing_target}
        webhook = _job(api, "hook", hook, retry={"max_attempts": 1})
        _enqueue(api, webhook, 1)
        # An overlap skip: the second run of an overlap: skip job is due while the first
        # still runs.
        blocks = handler | {"name": "blocks"}
        blocker = _job(api, "blocker", blocks, timeout_seconds=300, overlap="skip")
        _enqueue(api, blocker, 2)
        orphan = _job(api, "orphan", handler | {"name": "ok"}, pool="nobody-serves")
        _enqueue(api, orphan, 2)
        # A skip: an every-second job paused for a while, then resumed without catch-up.
        every_second = {"kind": "cron", "cron": "* * * * * *", "timezone": "UTC"}
        body = {"name": "ticker", "schedule": every_second, "pool": "ticks"}
        ticker = api.post("/v1/jobs", json=body | {"action": handler | {"name": "ok"}}).json()["id"]
        assert api.post(f"/v1/jobs/{ticker}/pause").status_code == 200
        paused_at = time.monotonic()
        wait_until("3 s paused", lambda: time.monotonic() - paused_at > 3, 10, [log])
        assert api.post(f"/v1/jobs/{ticker}/resume").status_code == 200
        assert api.post(f"/v1/jobs/{ticker}/pause").status_code == 200

        def settled() -> bool:
            runs = {j: _runs(api, j) for j in (ok, flaky, broken, webhook, blocker, ticker)}
            finished = ("succeeded", "dead", "skipped", "cancelled")
            return all(
                r["state"] in finished
                for j in (ok, flaky, broken, webhook, ticker)
                for r in runs[j]
            ) and sorted(r["state"] for r in runs[blocker]) == ["running", "skipped"]

        wait_until("every run of the scenario settled", settled, 90, [log])
        ticks = _runs(api, ticker)
        skipped = sum(r["state"] == "skipped" for r in ticks)
        ticked = sum(r["state"] == "succeeded" for r in ticks)
        # paused for over 3 s at one a second, less what was planned ahead (2 s)
        assert skipped >= 1, ticks

        expected = {
            ("cronwheel_attempts_total", "default", "succeeded"): 3 + 1,
            ("cronwheel_attempts_total", "default", "failed"): 1 + 1,  # flaky, webhook
            ("cronwheel_attempts_total", "default", "permanent"): 1,
        }

        def scraped() -> Samples | None:
            samples, _ = scrape(f"{base}/metrics")
            done = all(
                value(samples, name, pool=pool, outcome=outcome) == n
                for (name, pool, outcome), n in expected.items()
            )
            gauges_fresh = value(samples, "cronwheel_dead_letter_runs", tenant="all") == 2
            running = value(samples, "cronwheel_runs_running", pool="default") == 1
            return samples if done and gauges_fresh and running else None

        samples = wait_until("the scrape shows the scenario", scraped, 60, [log])
        _, families = scrape(f"{base}/metrics")

    v = lambda name, **labels: value(samples, name, **labels)  # noqa: E731
    assert (v("cronwheel_attempts_total", pool="ticks", outcome="succeeded") or 0) == ticked
    assert v("cronwheel_attempts_total", pool="default", outcome="timed_out") is None
    # 7 attempts ended in pool default (3 ok, 2 flaky, broken, hook): each has a lag
    assert v("cronwheel_run_start_lag_seconds_count", pool="default") == 7
    assert v("cronwheel_run_start_lag_seconds_bucket", pool="default", le="+Inf") == 7
    assert v("cronwheel_run_duration_seconds_count", pool="default", outcome="succeeded") == 4
    assert v("cronwheel_run_duration_seconds_count", pool="default", outcome="failed") == 2
    # millisecond buckets exist
    assert v("cronwheel_run_start_lag_seconds_bucket", pool="default", le="0.001") is not None
    assert v("cronwheel_webhook_responses_total", status_class="5xx") == 1
    assert v("cronwheel_webhook_responses_total", status_class="2xx") == 0
    assert v("cronwheel_runs_skipped_total", reason="paused") == skipped
    assert v("cronwheel_runs_skipped_total", reason="misfire") == 0
    assert v("cronwheel_runs_skipped_total", reason="overlap") == 1
    # store-derived gauges
    assert v("cronwheel_store_up") == 1
    assert v("cronwheel_dead_letter_runs", tenant="all") == 2
    assert v("cronwheel_runs_running", pool="default") == 1
    assert v("cronwheel_runs_due", pool="nobody-serves", priority="normal") == 2
    assert v("cronwheel_runs_due", pool="default", priority="normal") is None
    age = v("cronwheel_oldest_due_run_age_seconds", pool="nobody-serves")
    assert age is not None and age > 3  # enqueued before the 3 s pause
    assert v("cronwheel_workers_alive", pool="default") == 1
    assert v("cronwheel_workers_alive", pool="ticks") == 1
    assert v("cronwheel_workers_alive", pool="nobody-serves") is None
    # the scheduler of cronwheel dev: unsharded, one of one
    assert (v("cronwheel_scheduler_tick_seconds_count") or 0) > 0
    assert v("cronwheel_scheduler_shards_owned") == 1
    assert v("cronwheel_scheduler_shards") == 1
    assert (v("cronwheel_scheduler_lead_seconds") or 0) >= 2
    # no job or run id is ever a label
    labels = {k for (_, pairs) in samples for k, _ in pairs}
    assert labels <= {"pool", "priority", "outcome", "tenant", "reason", "status_class", "le"}
    assert {
        "cronwheel_run_start_lag_seconds",
        "cronwheel_run_duration_seconds",
        "cronwheel_attempts",
        "cronwheel_runs_due",
        "cronwheel_oldest_due_run_age_seconds",
        "cronwheel_runs_running",
        "cronwheel_dead_letter_runs",
        "cronwheel_runs_skipped",
        "cronwheel_webhook_responses",
        "cronwheel_scheduler_tick_seconds",
        "cronwheel_scheduler_shards_owned",
        "cronwheel_scheduler_lead_seconds",
        "cronwheel_workers_alive",
    } <= families


def test_worker_and_scheduler_serve_their_metrics_on_metrics_port(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cluster.db'}"
    api_port, worker_port, scheduler_port = free_port(), free_port(), free_port()
    logs = [tmp_path / name for name in ("api.log", "worker.log", "scheduler.log")]
    token = "an-admin-token-of-32-characters!"
    with (
        cronwheel("api", "--db", db, "--port", str(api_port), "--admin-token", token, log=logs[0]),
        cronwheel(
            "worker", "--db", db, "--app", APP, "--metrics-port", str(worker_port), log=logs[1]
        ),
        cronwheel(
            "scheduler",
            "--db",
            db,
            "--shards",
            "8",
            "--metrics-port",
            str(scheduler_port),
            log=logs[2],
        ),  # fmt: skip
        httpx.Client(
            base_url=f"http://127.0.0.1:{api_port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        ) as api,
    ):
        wait_until("the API answers", lambda: api.get("/healthz").status_code == 200, 60, logs)
        ok = _job(api, "ok", {"type": "handler", "name": "ok"})
        _enqueue(api, ok, 2)
        worker_url = f"http://127.0.0.1:{worker_port}/metrics"

        def worked() -> Samples | None:
            samples, _ = scrape(worker_url)
            n = value(samples, "cronwheel_attempts_total", pool="default", outcome="succeeded")
            return samples if n == 2 else None

        worker_samples = wait_until("the worker's scrape shows 2 attempts", worked, 60, logs)
        _, worker_families = scrape(worker_url)
        scheduler_url = f"http://127.0.0.1:{scheduler_port}/metrics"

        def owns_all() -> Samples | None:
            samples, _ = scrape(scheduler_url)
            return samples if value(samples, "cronwheel_scheduler_shards_owned") == 8 else None

        scheduler_samples = wait_until("the scheduler owns its 8 shards", owns_all, 60, logs)
        # /metrics is open like /healthz: no token needed, even where the API wants one
        anonymous = httpx.get(f"http://127.0.0.1:{api_port}/metrics", timeout=10)
        assert anonymous.status_code == 200
        assert httpx.get(f"http://127.0.0.1:{api_port}/v1/jobs").status_code == 401
    assert value(worker_samples, "cronwheel_run_start_lag_seconds_count", pool="default") == 2
    # the cluster-wide gauges come from the API only, so a cluster reports them once
    assert "cronwheel_runs_due" not in worker_families
    assert "cronwheel_workers_alive" not in worker_families
    # only schedulers export the scheduler's metrics: an API or a worker exporting 0 of 0
    # shards would hide a cluster without a scheduler from the alert (issue 29)
    api_families = {f.name for f in text_string_to_metric_families(anonymous.text)}
    for name in (
        "cronwheel_scheduler_shards_owned",
        "cronwheel_scheduler_shards",
        "cronwheel_scheduler_lead_seconds",
        "cronwheel_scheduler_tick_seconds",
    ):
        assert name not in worker_families, name
        assert name not in api_families, name
    assert value(scheduler_samples, "cronwheel_scheduler_shards") == 8
    assert (value(scheduler_samples, "cronwheel_scheduler_tick_seconds_count") or 0) > 0
    text = anonymous.text
    assert 'cronwheel_workers_alive{pool="default"} 1.0' in text
    assert 'cronwheel_dead_letter_runs{tenant="all"} 0.0' in text


def test_a_metrics_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = f"sqlite:///{tmp_path / 'busy.db'}"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "cronwheel",
                "scheduler",
                "--db",
                db,
                "--metrics-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert f"metrics: port {port} on 127.0.0.1 is already in use" in done.stderr
    assert "Traceback" not in done.stderr
