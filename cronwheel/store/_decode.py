"""Decoding that both stores' rows share, on the hot paths: a worker's claimed runs and
a scheduler's due jobs."""

from __future__ import annotations

import functools
import json
from typing import Any

from cronwheel.core.model import (
    Delivery,
    JobState,
    MisfirePolicy,
    Overlap,
    Priority,
    RetryPolicy,
    RunState,
)

# Enum members by value: a dict lookup is ten times cheaper than ``RunState(value)``, and
# a worker decodes several per claimed run.
RUN_STATES = {m.value: m for m in RunState}
PRIORITIES = {m.value: m for m in Priority}
OVERLAPS = {m.value: m for m in Overlap}
DELIVERIES = {m.value: m for m in Delivery}
JOB_STATES = {m.value: m for m in JobState}


@functools.lru_cache(maxsize=1024)
def action(text: str) -> dict[str, Any]:
    """A job's action from its JSON text, decoded once per distinct text: every run of a
    job shares it. Shared, so read-only; the payload, which a handler may change, is
    decoded afresh for every run."""
    decoded: dict[str, Any] = json.loads(text)
    return decoded


@functools.lru_cache(maxsize=1024)
def retry_policy(text: str) -> RetryPolicy:
    """A retry policy from its JSON text, decoded once per distinct text."""
    return RetryPolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=1024)
def misfire_policy(text: str) -> MisfirePolicy:
    """A misfire policy from its JSON text, decoded once per distinct text."""
    return MisfirePolicy.from_dict(json.loads(text))


@functools.lru_cache(maxsize=4096)
def schedule(text: str) -> dict[str, Any]:
    """A job's schedule from its JSON text, decoded once per distinct text: the jobs of a
    herd share theirs. Shared, so read-only, as :func:`action`'s."""
    decoded: dict[str, Any] = json.loads(text)
    return decoded
