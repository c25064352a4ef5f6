"""A batch of new jobs as each store writes it: what each job has of its own (id, name,
payload) apart from what it shares with the other jobs of the batch (everything else).

A bulk create's jobs mostly differ only in their names, so the shared columns are
encoded (JSON, instants, enums) once per distinct set instead of once per job.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from cronwheel.core.model import Job

SHARED_FIELDS = (
    "tenant_id",
    "schedule",
    "action",
    "pool",
    "priority",
    "retry",
    "timeout_seconds",
    "misfire",
    "overlap",
    "jitter_seconds",
    "catchup_seconds",
    "delivery",
    "state",
    "version",
    "next_fire_at",
    "last_fire_at",
    "created_at",
    "updated_at",
    "notify",
)
_shared = operator.attrgetter(*SHARED_FIELDS)
T = TypeVar("T")


def templates(jobs: Sequence[Job]) -> tuple[list[Job], list[int]]:
    """One job per distinct tuple of :data:`SHARED_FIELDS`' values among ``jobs`` (the
    first that has it: a store encodes its shared columns for all), and for each job the
    index of its template.

    Jobs share a template when they hold the very same objects, as the jobs that
    ``create_many`` builds from equal specs do: nothing is compared or hashed but the
    objects' ids, and ``jobs`` keeps the objects alive, so no id is reused meanwhile.
    Equal values held in distinct objects merely make distinct templates.
    """
    index: dict[tuple[int, ...], int] = {}
    found: list[Job] = []
    picks: list[int] = []
    last: tuple[Any, ...] = ()
    pick = -1
    for job in jobs:
        fields = _shared(job)
        # Neighbours mostly share a template: comparing with the last one is cheaper than
        # hashing the ids.
        if last and all(map(operator.is_, fields, last)):
            picks.append(pick)
            continue
        key = tuple(map(id, fields))
        known = index.get(key)
        if known is None:
            known = index[key] = len(found)
            found.append(job)
        pick, last = known, fields
        picks.append(pick)
    return found, picks


def by_identity(values: Sequence[Any], encode: Callable[[Any], T]) -> list[T]:
    """``[encode(v) for v in values]``, calling ``encode`` once per distinct object."""
    seen: dict[int, tuple[Any, T]] = {}
    out = []
    for value in values:
        hit = seen.get(id(value))
        if hit is None:
            hit = seen[id(value)] = (value, encode(value))  # holding value keeps its id
        out.append(hit[1])
    return out
