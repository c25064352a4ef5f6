"""A real HTTP server on loopback that records requests and answers as told, by path."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.time)
    """When it arrived (``time.time()``)."""


@dataclass
class Target:
    url: str
    received: list[Received] = field(default_factory=list)
    answers: dict[str, list[tuple[int, dict[str, str]]]] = field(default_factory=dict)
    """path → responses to give in turn (the last one repeats); default 200."""
    delays: dict[str, float] = field(default_factory=dict)
    """path → seconds to wait before answering."""
    echoes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """path → request headers whose values the answer's body echoes (``name=value``
    each, as a debugging target does); default ``ok`` or ``nope``."""

    def answer(self, path: str) -> tuple[int, dict[str, str]]:
        queue = self.answers.get(path) or [(200, {})]
        return queue.pop(0) if len(queue) > 1 else queue[0]


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    """The listen backlog (socketserver's default is 5): a burst of webhooks from a worker
    that was starved of CPU must queue, not be reset."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A worker SIGKILLed (or a request aborted) mid-answer: the client is gone, which
        # the test reads from the store; a traceback on stderr would say nothing more.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def webhook_target(port: int = 0) -> Iterator[Target]:
    """A target on loopback: on ``port``, or on a free port (0)."""
    target = Target(url="")

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            target.received.append(Received(self.command, self.path, dict(self.headers), body))
            time.sleep(target.delays.get(self.path, 0.0))
            status, headers = target.answer(self.path)
            payload = b"ok" if status < 300 else b"nope"
            if self.path in target.echoes:
                echoed = [f"{h}={self.headers.get(h)}" for h in target.echoes[self.path]]
                payload = " ".join(echoed).encode()
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = _handle

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _Server(("127.0.0.1", port), Handler)
    target.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield target
    finally:
        server.shutdown()
        server.server_close()
