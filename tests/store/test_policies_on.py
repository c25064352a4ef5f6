"""Conformance: a pool that used no claim policy keeps every limit the moment one is
turned on (decision 0047)."""

from __future__ import annotations

from cronwheel.store.conformance.queue.policies_on import PoliciesOnContract


class TestPoliciesOn(PoliciesOnContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
