"""``cronwheel dev --demo``: example jobs that show every path a run can take.

A one-time job, a cron job every five seconds, a webhook to a built-in echo endpoint, and
a job that fails, retries with backoff and lands in the dead-letter queue.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cronwheel.actions import RunContext
from cronwheel.actions.handler import HandlerRegistry
from cronwheel.control.service import JobService
from cronwheel.core.model import JobState
from cronwheel.errors import Conflict


def demo_handlers() -> HandlerRegistry:
    registry = HandlerRegistry()
    registry.register("demo.hello", _hello)
    registry.register("demo.tick", _tick)
    registry.register("demo.flaky", _flaky)
    return registry


def _hello(ctx: RunContext) -> str:
    return f"hello from run {ctx.run_id}"


def _tick(ctx: RunContext) -> None:
    ctx.progress(1.0, f"tick for {ctx.scheduled_for.isoformat()}")


def _flaky(ctx: RunContext) -> None:
    raise RuntimeError(f"the demo job fails on purpose (attempt {ctx.attempt})")


def demo_jobs(now: datetime, echo_url: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "demo-once",
            "schedule": {"kind": "once", "at": (now + timedelta(seconds=3)).isoformat()},
            "action": {"type": "handler", "name": "demo.hello"},
        },
        {
            "name": "demo-every-5s",
            "schedule": {"kind": "cron", "cron": "*/5 * * * * *", "timezone": "UTC"},
            "action": {"type": "handler", "name": "demo.tick"},
        },
        {
            "name": "demo-webhook",
            "schedule": {"kind": "interval", "every_seconds": 7},
            "action": {"type": "webhook", "url": f"{echo_url}/echo", "method": "POST"},
            "payload": {"hello": "webhook"},
        },
        {
            "name": "demo-flaky",
            "schedule": {"kind": "delay", "seconds": 1},
            "action": {"type": "handler", "name": "demo.flaky"},
            "retry": {
                "max_attempts": 3,
                "backoff": "exponential",
                "initial_delay": 1,
                "max_delay": 4,
            },
        },
    ]


RENEWED_ON_START = frozenset({"demo-flaky", "demo-webhook"})
"""Demo jobs made anew at each start: a fresh flaky run to watch fail, and the webhook
pointed at this start's echo endpoint (the last one's port is gone)."""


async def create_demo_jobs(service: JobService, echo_url: str) -> int:
    """Create the demo jobs that do not exist yet (a restart keeps the earlier ones)."""
    created = 0
    for spec in demo_jobs(service.clock.now(), echo_url):
        same = await service.list_jobs(name_prefix=spec["name"], limit=100)
        live = [j for j in same if j.name == spec["name"] and j.state is not JobState.CANCELLED]
        if live and spec["name"] not in RENEWED_ON_START:
            continue
        for job in live:
            await service.cancel(job.id)
        with contextlib.suppress(Conflict):
            await service.create(**spec)
            created += 1
    return created


@contextlib.contextmanager
def echo_server() -> Iterator[str]:
    """A loopback HTTP endpoint that answers 200 with what it received."""

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, name="demo-echo", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
