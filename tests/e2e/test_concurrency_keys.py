"""Issue 17 with real processes: a concurrency key of 1 never runs two at once across
three worker processes, while runs of different keys overlap, as a webhook receiver
counting the requests in flight per key sees it (decision 0031)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import cronwheel
from cronwheel.model import RunState
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

CUSTOMERS = ("c1", "c2", "c3")
PER_CUSTOMER = 8
RUNS = len(CUSTOMERS) * PER_CUSTOMER


class _Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Count)
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.peak_total = 0
        self.seen = 0


class _Count(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        customer = str(body["payload"]["customer"])
        with self.server.lock:
            self.server.now[customer] += 1
            self.server.peak[customer] = max(self.server.peak[customer], self.server.now[customer])
            self.server.peak_total = max(self.server.peak_total, sum(self.server.now.values()))
        time.sleep(0.1)  # long enough for three workers' runs to overlap, if allowed
        with self.server.lock:
            self.server.now[customer] -= 1
            self.server.seen += 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()


async def test_a_key_of_one_never_runs_twice_at_once_across_three_workers(
    store_url: str, receiver: _Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWHEEL_WEBHOOK_ALLOW", "127.0.0.1")  # the receiver is local
    env = {"CRONWHEEL_WEBHOOK_ALLOW": "127.0.0.1"}
    url = f"http://127.0.0.1:{receiver.server_port}/report"
    async with await cronwheel.connect(store_url) as cw:
        job = await cw.create(
            name="reports",
            schedule={"kind": "manual"},
            action={"type": "webhook", "url": url},
            concurrency={"key": "report:{payload.customer}", "limit": 1},
        )
        payloads = [{"customer": c} for _ in range(PER_CUSTOMER) for c in CUSTOMERS]
        await cw.enqueue(job.id, payloads)
        with ExitStack() as workers:
            for i in range(3):
                workers.enter_context(
                    cronwheel_proc(
                        "worker",
                        "--concurrency",
                        "10",
                        "--db",
                        store_url,
                        env=env,
                        log=tmp_path / f"worker{i}.log",
                    )
                )

            async def all_done() -> bool:
                await asyncio.sleep(0)
                runs = await cw.store.list_runs("default", state=RunState.SUCCEEDED, limit=100)
                return len(runs) == RUNS

            await eventually(all_done, timeout=180)
    assert receiver.seen == RUNS
    assert receiver.peak == {c: 1 for c in CUSTOMERS}  # one report per customer at a time
    assert receiver.peak_total >= 2  # different keys did run at once
