"""Conformance: the scheduler's verbs — due jobs and insert-if-absent runs (I2)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.materialize import MaterializeContract


class TestMaterialize(MaterializeContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
