"""Issue 17 with real processes: a tenant's max_running holds across four worker
processes, as a webhook receiver counting the requests in flight sees it (decision 0028)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import cronwheel
from cronwheel.model import RunState, Tenant
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

CAP = 3
RUNS = 40


class _Receiver(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Count)
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.seen = 0


class _Count(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.now += 1
            self.server.peak = max(self.server.peak, self.server.now)
        time.sleep(0.05)  # long enough for four workers' runs to overlap, if allowed
        with self.server.lock:
            self.server.now -= 1
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


async def test_max_running_holds_across_four_worker_processes(
    store_url: str, receiver: _Receiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CRONWHEEL_WEBHOOK_ALLOW", "127.0.0.1")  # the receiver is local
    env = {"CRONWHEEL_WEBHOOK_ALLOW": "127.0.0.1"}
    url = f"http://127.0.0.1:{receiver.server_port}/hit"
    async with await cronwheel.connect(store_url) as cw:
        await cw.store.create_tenant(Tenant("capped", "capped", datetime.now(UTC), max_running=CAP))
        job = await cw.create(
            "capped",
            name="calls",
            schedule={"kind": "manual"},
            action={"type": "webhook", "url": url},
        )
        await cw.enqueue(job.id, [None] * RUNS, tenant_id="capped")
        with ExitStack() as workers:
            for i in range(4):
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
                runs = await cw.store.list_runs("capped", state=RunState.SUCCEEDED, limit=100)
                return len(runs) == RUNS

            await eventually(all_done, timeout=180)
    assert receiver.seen == RUNS
    assert receiver.peak <= CAP
    assert receiver.peak >= 2  # the runs did overlap: the cap, not luck, held them
