"""Contract: every run transition a store makes is the one cronwheel.core.lifecycle decides
(decision 0040).

The table below walks every (state, event) pair of ``lifecycle.STATE_EVENTS`` (a test
fails if one has no case) through each store: SQLite calls the lifecycle functions, and
PostgreSQL keeps set-based SQL for its batched paths (claim, complete, rescue, release,
replay), so each case drives the store, then requires the run it left to read exactly as
the function's verdict says: state, attempt, budget, next due time, finish, reason and
error, and the attempt row it recorded.
"""

from __future__ import annotations

from cronwheel.store.conformance.queue.transitions import TransitionsContract


class TestTransitions(TransitionsContract):
    """The shared contract, on each backend (the ``store`` fixture)."""
