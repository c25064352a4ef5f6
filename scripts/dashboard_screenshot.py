"""Refresh the README's dashboard screenshot (docs/images/dashboard-jobs.png) from a real
``cronwheel dev``: the demo's jobs, the README's handler and a few cron jobs in their own
zones, then the jobs page in Debian's chromium, as the browser tests drive it.

    python scripts/dashboard_screenshot.py        # from the repository root, in the venv
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.e2e.procs import free_port  # noqa: E402

OUT = REPO / "docs" / "images" / "dashboard-jobs.png"
JOBS = [
    {
        "name": "greet",
        "schedule": {"kind": "cron", "cron": "*/5 * * * * *"},
        "action": {"type": "handler", "name": "greet"},
        "payload": {"who": "world"},
    },
    {
        "name": "nightly-report",
        "schedule": {"kind": "cron", "cron": "30 2 * * *", "timezone": "Europe/Paris"},
        "action": {"type": "webhook", "url": "https://example.com/hooks/report"},
        "retry": {"max_attempts": 5},
    },
    {
        "name": "invoices-month-end",
        "schedule": {"kind": "cron", "cron": "0 18 L * *", "timezone": "America/New_York"},
        "action": {"type": "handler", "name": "greet"},
        "payload": {"who": "accounts"},
        "priority": "high",
    },
]


def main() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        dev = subprocess.Popen(
            [sys.executable, "-m", "cronwheel", "dev", "--demo", "--port", str(port),
             "--app", "examples.quickstart.app:worker", "--db", f"{folder}/dev.db"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=1).is_success:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("cronwheel dev did not answer within 60 s")
                time.sleep(0.2)
            for job in JOBS:
                httpx.post(f"{url}/v1/jobs", json=job, timeout=10).raise_for_status()
            time.sleep(12)  # the demo's flaky job retries twice and lands in the dead letter
            from playwright.sync_api import sync_playwright

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 700})
                page.goto(f"{url}/ui/jobs?order=name")
                page.wait_for_load_state("networkidle")
                page.screenshot(path=str(OUT), full_page=True)
                browser.close()
        finally:
            dev.send_signal(signal.SIGTERM)
            dev.wait(timeout=30)
    print(f"{OUT.relative_to(REPO)}: {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
