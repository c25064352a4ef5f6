"""Workload sizes, full and quick. run.py passes one workload's parameters to each
adapter as JSON, so every system gets exactly the same work."""

from __future__ import annotations

from typing import Any

WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "W6")

TITLES = {
    "W1": "throughput",
    "W2": "thundering herd",
    "W3": "precision",
    "W4": "cron every second",
    "W5": "scale at rest",
    "W6": "fairness",
}

FULL: dict[str, dict[str, Any]] = {
    "W1": {"n": 20_000},
    "W2": {"n": 10_000, "lead": 10.0},
    "W3": {"n": 2_000, "span": 20.0, "lead": 3.0},
    "W4": {"jobs": 200, "seconds": 65, "settle": 5.0},
    "W5": {"jobs": 1_000_000, "small": 10_000, "batch": 10_000, "ticks": 10},
    # Tenant A's backlog drains in seconds: B sends a run every b_every seconds (ten a
    # second, not one) so that its p99 is a percentile of enough samples; "alone" is
    # how long B runs by itself first, the reference.
    "W6": {"a": 100_000, "b_every": 0.1, "alone": 5.0},
}

# Small enough that cronwheel-sqlite + cronwheel-pg run every workload in well under a
# minute (CI), large enough to exercise every code path of the full run.
QUICK: dict[str, dict[str, Any]] = {
    "W1": {"n": 500},
    "W2": {"n": 200, "lead": 2.0},
    "W3": {"n": 100, "span": 2.0, "lead": 1.5},
    "W4": {"jobs": 10, "seconds": 5, "settle": 1.0},
    "W5": {"jobs": 5_000, "small": 1_000, "batch": 1_000, "ticks": 5},
    "W6": {"a": 10_000, "b_every": 0.05, "alone": 1.0},
}


def params(workload: str, quick: bool) -> dict[str, Any]:
    return dict((QUICK if quick else FULL)[workload])
