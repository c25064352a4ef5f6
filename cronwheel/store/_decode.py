"""Decoding that both stores' rows share, on the worker's hot path (a claimed run)."""

from __future__ import annotations

import functools
import json
from typing import Any

from cronwheel.model import Delivery, Overlap, Priority, RetryPolicy, RunState

# Enum members by value: a dict lookup is ten times cheaper than ``RunState(value)``, and
# a worker decodes several per claimed run.
RUN_STATES = {m.value: m for m in RunState}
PRIORITIES = {m.value: m for m in Priority}
OVERLAPS = {m.value: m for m in Overlap}
DELIVERIES = {m.value: m for m in Delivery}


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
