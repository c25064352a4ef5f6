"""Whether a command job has a worker to run it: the API's check (issue 30 item 1).

A worker runs a command only if its operator allowed the executable: a cronwheel worker
with ``--allow-command``, a tenant's remote worker with the ``commands`` patterns of its
claims and heartbeats (decision 0054). Each announces them, and a command job (or
pipeline task) that no live worker of its pool would run is refused, naming why: its
runs could only fail. The workers of a pool are the cronwheel workers, which serve every
tenant, and the job's own tenant's remote workers; a remote worker that announced no
patterns runs no command. A pool that no live worker serves at all is not refused:
workers are often started after the jobs are applied (a deploy, infrastructure as
code), and the job's ``no_live_worker`` notice says its runs wait (cronwheel.web.notices).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from cronwheel.core.model import SEEN_WINDOW, WorkerInfo
from cronwheel.errors import InvalidInput
from cronwheel.security.commands import AllowList
from cronwheel.store.base import Store

CommandUse = tuple[str, str, str, Mapping[str, Any]]
"""Where a command is used (the action's field, ``action`` or ``tasks.x.action``), the
tenant and the pool its runs go to, and the action (as a ``PublishUse``)."""


def _may_run(worker: WorkerInfo, program: str) -> bool:
    try:
        return AllowList(worker.commands).allows(program)
    except ValueError:  # patterns this version cannot read: it is not counted on
        return False


async def check_commands(store: Store, now: datetime, uses: Iterable[CommandUse]) -> None:
    """InvalidInput naming ``<field>.argv`` for a command that live workers of its pool
    serve, none of which allows its executable."""
    commands = [u for u in uses if u[3].get("type") == "command"]
    if not commands:
        return
    live = await store.list_live_workers(seen_since=now - SEEN_WINDOW)
    for field, tenant_id, pool, action in commands:
        # Another tenant's remote worker never gets this tenant's runs: it is no help.
        serving = [w for w in live if w.serves(tenant_id, pool)]
        program = str((action.get("argv") or [""])[0])
        if not serving or any(_may_run(w, program) for w in serving):
            continue
        count = f"{len(serving)} live worker{'s' if len(serving) != 1 else ''}"
        raise InvalidInput(
            f"{field}.argv",
            f"no live worker of pool {pool!r} would run {program!r}: {count} serve the"
            " pool, and none was allowed to run it by its operator (cronwheel worker"
            f" --allow-command {program}; a remote worker announces the patterns it runs"
            " as commands in its claims); ask them, or use a pool whose workers run it",
        )
