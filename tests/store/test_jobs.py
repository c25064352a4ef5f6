"""Conformance: job definitions — create, read, list, update, state changes."""

from __future__ import annotations

from cronwheel.store.conformance.catalogue.jobs import JobsContract


class TestJobs(JobsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
