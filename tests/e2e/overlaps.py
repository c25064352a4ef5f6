"""A webhook receiver for real-process tests that counts the requests in flight, in all
and per key (a field of the run's payload): what limits on running runs are checked by."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OverlapReceiver(ThreadingHTTPServer):
    """Each request is held ``hold`` seconds, long enough for the workers' runs to
    overlap if nothing stops them. ``peak_total``: most requests in flight at once;
    ``peak[key]``: most of one key (the payload's ``key_field``) at once."""

    daemon_threads = True

    def __init__(self, hold: float, key_field: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Count)
        self.hold = hold
        self.key_field = key_field
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.peak_total = 0
        self.seen = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_port}/{path}"


class _Count(BaseHTTPRequestHandler):
    server: OverlapReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        field = self.server.key_field
        key = "" if field is None else str(json.loads(body)["payload"][field])
        with self.server.lock:
            self.server.now[key] += 1
            self.server.peak[key] = max(self.server.peak[key], self.server.now[key])
            total = sum(self.server.now.values())
            self.server.peak_total = max(self.server.peak_total, total)
        time.sleep(self.server.hold)
        with self.server.lock:
            self.server.now[key] -= 1
            self.server.seen += 1
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet: the test's output is its assertions."""


@contextmanager
def overlap_receiver(hold: float, key_field: str | None = None) -> Iterator[OverlapReceiver]:
    server = OverlapReceiver(hold, key_field)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
