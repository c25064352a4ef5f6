"""Whether a publish action has a worker to publish it: the API's check (decision 0049).

A worker publishes only to the brokers its operator named (``--broker NAME=URL``), and
announces their names and kinds with every heartbeat. A publish job or pipeline task
whose broker no live worker of its pool names, or whose ``to`` that broker's kind cannot
take, is refused naming the field: its runs could only fail. A pool that no live worker
serves at all is not refused: its runs wait for the workers, as any job's do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cronwheel.core.brokers import target_problem
from cronwheel.core.model import SEEN_WINDOW, WorkerInfo
from cronwheel.errors import InvalidInput
from cronwheel.store.base import Store

PublishUse = tuple[str, str, str, Mapping[str, Any]]
"""Where a publish action is used (its field, ``action`` or ``tasks.x.action``), the
tenant and the pool its runs go to, and the action."""


def broker_problem(live: list[WorkerInfo], use: PublishUse) -> tuple[str, str] | None:
    """(field, reason) if no live worker of the use's pool names its broker, or that
    broker's kind cannot take its ``to``; None if they can, or no worker of the pool is
    live. In-process workers serve every tenant; a remote one only its own, with the
    brokers it announces in its claims and heartbeats (decision 0054)."""
    where, tenant_id, pool, action = use
    named: dict[str, str] = {}
    served = False
    for worker in live:
        if worker.serves(tenant_id, pool):
            served = True
            named.update(worker.brokers)
    if not served:
        return None
    broker, to = str(action.get("broker")), str(action.get("to"))
    if broker not in named:
        known = ", ".join(sorted(named)) or "none"
        return (
            f"{where}.broker",
            f"no live worker of pool {pool!r} names a broker {broker!r} (they name:"
            f" {known}); start them with --broker {broker}=URL, or fix the name",
        )
    problem = target_problem(named[broker], to)
    return None if problem is None else (f"{where}.to", problem)


async def broker_problems(
    store: Store, now: datetime, uses: Iterable[PublishUse]
) -> list[tuple[int, str, str]]:
    """(index, field, reason) of each publish use, in ``uses``' order, that no live
    worker could publish (:func:`broker_problem`); other actions are skipped."""
    publishes = [(i, u) for i, u in enumerate(uses) if u[3].get("type") == "publish"]
    if not publishes:
        return []
    live = await store.list_live_workers(seen_since=now - SEEN_WINDOW)
    found = []
    for i, use in publishes:
        problem = broker_problem(live, use)
        if problem is not None:
            found.append((i, *problem))
    return found


async def check_brokers(store: Store, now: datetime, uses: Iterable[PublishUse]) -> None:
    """InvalidInput naming ``<field>.broker`` (or ``.to``) for the first publish use no
    live worker of its pool could publish."""
    problems = await broker_problems(store, now, uses)
    if problems:
        _, field, reason = problems[0]
        raise InvalidInput(field, reason)
