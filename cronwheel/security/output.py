"""What of a command's output an attempt keeps: its exit, and the end of its stdout and
stderr, redacted of the command's secrets before it is cut (so that no secret is left
half shown), at most :data:`MAX_OUTPUT` bytes of each.

One rule for the two ways an output arrives: a cronwheel worker reads it from the
command's pipes (cronwheel.actions.command), and a remote worker sends it with its
completion (``POST /v1/runs/{id}/complete``, decision 0054). Both are kept, shown and
bounded the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cronwheel.security.redact import redact

MAX_OUTPUT = 64 * 1024
"""Bytes of each of stdout and stderr kept with an attempt: the last ones (the end of
a log says why it failed). The rest is read and dropped: a chatty command costs the
worker no memory."""


class Tail:
    """The last ``limit`` bytes of a stream, and how many came before them."""

    def __init__(self, limit: int = MAX_OUTPUT) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.kept += chunk
        # Some more than the limit is kept until the text is made: a secret cut by the
        # limit is whole when it is redacted (see text).
        if len(self.kept) > 2 * self.limit:
            del self.kept[: len(self.kept) - self.limit - 4096]

    def text(self, secrets: Iterable[str]) -> str:
        """The tail as text, secrets redacted, then cut to the limit (marked if it was)."""
        text = redact(bytes(self.kept).decode("utf-8", errors="replace"), secrets)
        encoded = text.encode()
        if len(encoded) <= self.limit and self.total <= len(self.kept):
            return text
        cut = encoded[-self.limit :].decode("utf-8", errors="ignore")
        dropped = self.total - len(cut.encode())
        return f"[… {max(dropped, 0)} bytes before this not kept …]\n{cut}"


def kept_text(text: str, secrets: Iterable[str], limit: int = MAX_OUTPUT) -> str:
    """``text`` (a whole stream, or what a remote worker kept of it) as an attempt keeps
    it: redacted of ``secrets`` (and of what :func:`redact` always masks), then its last
    ``limit`` bytes."""
    tail = Tail(limit)
    tail.add(text.encode("utf-8", errors="replace"))
    return tail.text(secrets)


def output_record(exit_code: int | None, signal: str | None, stdout: str, stderr: str) -> str:
    """The JSON text of ``attempts.output`` (read back by the API's ``CommandOutputOut``):
    ``exit_code`` is null when a ``signal`` ended the command, which is then named."""
    record: dict[str, Any] = {"exit_code": exit_code}
    if signal is not None:
        record["signal"] = signal
    record |= {"stdout": stdout, "stderr": stderr}
    return json.dumps(record)
