"""Conformance: an attempt keeps the HTTP status its webhook target answered (0008)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.attempt_http_status import AttemptHttpStatusContract


class TestAttemptHttpStatus(AttemptHttpStatusContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
