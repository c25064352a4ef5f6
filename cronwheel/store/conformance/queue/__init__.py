"""The ``queue`` seam's contract. The queue the engine runs on: materialise, enqueue, claim (fair, keyed, with overlap policies), heartbeat, start, complete, release, rescue."""

from __future__ import annotations

from cronwheel.store.conformance.queue.attempt_budget import AttemptBudgetContract
from cronwheel.store.conformance.queue.attempt_http_status import AttemptHttpStatusContract
from cronwheel.store.conformance.queue.attempt_output import AttemptOutputContract
from cronwheel.store.conformance.queue.claimed_ahead import ClaimedAheadContract
from cronwheel.store.conformance.queue.claims import ClaimsContract
from cronwheel.store.conformance.queue.concurrency_keys import ConcurrencyKeysContract
from cronwheel.store.conformance.queue.enqueue import EnqueueContract
from cronwheel.store.conformance.queue.fair_claims import FairClaimsContract
from cronwheel.store.conformance.queue.leases import LeasesContract
from cronwheel.store.conformance.queue.materialize import MaterializeContract
from cronwheel.store.conformance.queue.outcomes import OutcomesContract
from cronwheel.store.conformance.queue.overlap import OverlapContract
from cronwheel.store.conformance.queue.policies_on import PoliciesOnContract
from cronwheel.store.conformance.queue.progress_checkpoints import ProgressCheckpointsContract
from cronwheel.store.conformance.queue.transitions import TransitionsContract


class QueueSuite(
    AttemptBudgetContract,
    AttemptHttpStatusContract,
    AttemptOutputContract,
    ClaimedAheadContract,
    ClaimsContract,
    ConcurrencyKeysContract,
    EnqueueContract,
    FairClaimsContract,
    LeasesContract,
    MaterializeContract,
    OutcomesContract,
    OverlapContract,
    PoliciesOnContract,
    ProgressCheckpointsContract,
    TransitionsContract,
):
    """Every test of the ``queue`` seam: subclass it with a ``store`` fixture."""


__all__ = [
    "AttemptBudgetContract",
    "AttemptHttpStatusContract",
    "AttemptOutputContract",
    "ClaimedAheadContract",
    "ClaimsContract",
    "ConcurrencyKeysContract",
    "EnqueueContract",
    "FairClaimsContract",
    "LeasesContract",
    "MaterializeContract",
    "OutcomesContract",
    "OverlapContract",
    "PoliciesOnContract",
    "ProgressCheckpointsContract",
    "QueueSuite",
    "TransitionsContract",
]
