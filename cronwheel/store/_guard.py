"""Applying a scheduler's shard guard to a batch, the same way on every backend."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cronwheel.core.model import NewRun, ShardGuard, shard_key
from cronwheel.store.base import JobAdvance


def guarded(
    guard: ShardGuard,
    valid_shards: Iterable[int],
    runs: Sequence[NewRun],
    advances: Sequence[JobAdvance],
) -> tuple[list[NewRun], list[JobAdvance], list[str]]:
    """Keep the runs and advances of jobs in ``valid_shards``; name the refused jobs."""
    valid = set(valid_shards)

    def mine(job_id: str) -> bool:
        return shard_key(job_id) % guard.shard_count in valid

    refused = list(dict.fromkeys(a.job_id for a in advances if not mine(a.job_id)))
    return [r for r in runs if mine(r.job_id)], [a for a in advances if mine(a.job_id)], refused
