"""Conformance: pipeline definitions (decision 0025) — create, read a version, list,
update into a new version, delete, list versions, each scoped to its tenant."""

from __future__ import annotations

from cronwheel.store.conformance.catalogue.pipelines import PipelinesContract


class TestPipelines(PipelinesContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
