"""Remote workers over HTTP: claim, heartbeat, complete, and the registry of workers.

A remote worker is any process, in any language, holding a ``worker`` key. Its
``worker_id`` is namespaced by its tenant (``<tenant>/<worker_id>``) wherever the store
keeps it (lease owners, attempts, the registry), so a worker of one tenant can never
heartbeat or complete a run another tenant's worker holds. Completions go through
:func:`cronwheel.core.lifecycle.completion_for`, exactly as the in-process worker's do.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import BeforeValidator

from cronwheel.api.guards import GuardedRoute
from cronwheel.api.inputs import (
    CheckpointIn,
    ClaimIn,
    CommandOutputIn,
    CompleteIn,
    HeartbeatIn,
    ProgressIn,
)
from cronwheel.api.openapi import problems
from cronwheel.core.ids import INT64, run_id_text
from cronwheel.core.lifecycle import Outcome, claimed_run, completion_for
from cronwheel.core.model import (
    SEEN_WINDOW,
    SHARED_WORKERS,
    ClaimedRun,
    Run,
    RunState,
    WorkerInfo,
    checkpoint_text,
)
from cronwheel.core.records import Claim, RunReport
from cronwheel.errors import Conflict, InvalidInput, NotFound
from cronwheel.observability.metrics import ApiMetrics
from cronwheel.security.output import kept_text, output_record
from cronwheel.security.redact import redact
from cronwheel.security.sealing import (
    SecretsKeyMissing,
    SecretUnreadable,
    open_action,
    sent_secrets,
)
from cronwheel.store.base import Store
from cronwheel.web.auth import Principal, WorkerKey, WorkerWatcher
from cronwheel.web.schemas import (
    ClaimedOut,
    ClaimOut,
    HeartbeatOut,
    RunOut,
    WorkerItems,
    WorkerOut,
    dump,
)
from cronwheel.web.state import ApiState, api_state

router = APIRouter(tags=["workers"], route_class=GuardedRoute)

RunId = Annotated[int, Path(ge=1, le=INT64, description="A run id."), BeforeValidator(run_id_text)]
_rng = random.Random()


def lease_owner(principal: Principal, worker_id: str) -> str:
    """The name the store knows a remote worker by."""
    return f"{principal.tenant_id}/{worker_id}"


@router.post(
    "/v1/workers/claim",
    response_model=ClaimOut,
    responses=problems(),
    summary="Claim due runs",
)
async def claim(body: ClaimIn, request: Request, principal: WorkerKey) -> Any:
    """Lease up to ``capacity`` due runs of ``pools``, by priority then due time. Each
    answer carries the run's ``fence``: send it with every heartbeat and the completion."""
    state = api_state(request)
    now = state.clock.now()
    owner = lease_owner(principal, body.worker_id)
    rates = await state.pool_rates(now)
    claimed = await _claim(state.store, rates, owner, body, now, principal.tenant_id)
    # A remote worker's claim is made here: this process counts the skips it made.
    exporter: ApiMetrics = request.app.state.metrics
    exporter.metrics.runs_skipped("overlap", claimed.overlap_skipped)
    worker = WorkerInfo(
        id=owner,
        tenant_id=principal.tenant_id,
        host=body.host or _client_host(request),
        pools=tuple(body.pools),
        capacity=body.capacity,
        in_flight=body.in_flight + len(claimed),
        started_at=now,
        last_seen_at=now,
        brokers=dict(body.brokers or {}),
        commands=tuple(body.commands or ()),
    )
    await state.store.register_worker(worker)
    return dump(ClaimOut(runs=[ClaimedOut.of(c, state.sealer) for c in claimed]))


@router.post(
    "/v1/workers/heartbeat",
    response_model=HeartbeatOut,
    responses=problems(),
    summary="Extend leases",
)
async def heartbeat(body: HeartbeatIn, request: Request, principal: WorkerKey) -> Any:
    """Extend the leases still held; ``lost`` ones must be stopped, and
    ``cancel_requested`` ones stopped and completed as ``cancelled``."""
    state = api_state(request)
    now = state.clock.now()
    owner = lease_owner(principal, body.worker_id)
    result = await state.store.heartbeat(
        owner,
        [(lease.run_id, lease.fence) for lease in body.leases],
        now=now,
        lease_seconds=body.lease_seconds,
        reports=[
            _report(lease.run_id, lease.progress, lease.checkpoint)
            for lease in body.leases
            if lease.progress is not None or lease.checkpoint is not None
        ],
    )
    await _refresh(state, principal, owner, body, request, now)
    return dump(
        HeartbeatOut(
            extended=result.extended, lost=result.lost, cancel_requested=result.cancel_requested
        )
    )


async def _refresh(
    state: ApiState,
    principal: Principal,
    owner: str,
    body: HeartbeatIn,
    request: Request,
    now: datetime,
) -> None:
    """Refresh the worker's registry record; what the heartbeat does not say (pools,
    capacity, commands, brokers) is kept from its last claim."""
    known = await state.store.list_workers(principal.tenant_id, seen_since=now - timedelta(days=1))
    last = next((w for w in known if w.id == owner), None)
    pools = body.pools if body.pools is not None else (last.pools if last else ())
    capacity = body.capacity or (last.capacity if last else max(1, len(body.leases)))
    worker = WorkerInfo(
        id=owner,
        tenant_id=principal.tenant_id,
        host=body.host or (last.host if last else _client_host(request)),
        pools=tuple(pools),
        capacity=capacity,
        in_flight=len(body.leases),
        started_at=now,
        last_seen_at=now,
        brokers=body.brokers if body.brokers is not None else (last.brokers if last else {}),
        commands=(
            tuple(body.commands) if body.commands is not None else (last.commands if last else ())
        ),
    )
    await state.store.register_worker(worker)


@router.post(
    "/v1/runs/{run_id}/complete",
    response_model=RunOut,
    responses=problems(404, 409),
    summary="Report a run's outcome",
)
async def complete(run_id: RunId, body: CompleteIn, request: Request, principal: WorkerKey) -> Any:
    """Record the attempt and move the run on (succeeded, retry later, dead, cancelled),
    fenced: 409 if the run is no longer this worker's."""
    state = api_state(request)
    owner = lease_owner(principal, body.worker_id)
    run = await _held_run(state, principal, run_id, owner, body.fence)
    claimed = await _as_claimed(state, principal, run)
    now = state.clock.now()
    secrets = _sent_secrets(state, claimed)
    outcome = Outcome(
        body.outcome,
        _redacted(body.error_class, secrets),
        _redacted(body.error_message, secrets),
        body.retry_after,
        body.http_status,
        output=_output(claimed, body.output, secrets),
    )
    done = completion_for(
        claimed,
        outcome,
        worker_id=owner,
        started_at=run.started_at or now,
        finished_at=now,
        rng=_rng,
    )
    if body.progress is not None or body.checkpoint is not None:
        report = _report(run_id, body.progress, body.checkpoint)
        done = dataclasses.replace(
            done,
            progress=report.progress,
            progress_message=report.progress_message,
            checkpoint=report.checkpoint,
        )
    if run_id not in await state.store.complete_runs([done]):
        raise _stale(run, body.fence)  # taken over between the read and the write
    return dump(RunOut.of(await _run(state, principal, run_id)))


def _sent_secrets(state: ApiState, claimed: ClaimedRun) -> set[str]:
    """Every secret the run's action was handed to the worker with, in every form a
    target may echo it back: what an in-process worker redacts from the answers it
    records (cronwheel.actions.webhook.outcome_of)."""
    stored = claimed.action
    try:
        opened = open_action(stored, claimed.run.tenant_id, state.sealer)
    except (SecretsKeyMissing, SecretUnreadable):
        opened = stored  # the worker was given them masked (ClaimedOut.of): none to echo
    return sent_secrets(opened, stored)


def _redacted(text: str | None, secrets: set[str]) -> str | None:
    """A remote worker's error text as it may be stored and shown: it is whatever the
    worker's target answered, so it gets the redaction an in-process worker's does (the
    action's secrets, URL passwords, ``password=`` settings, this process's own
    secrets); a remote worker cannot store a credential in clear."""
    return None if text is None else redact(text, secrets)


def _output(claimed: ClaimedRun, sent: CommandOutputIn | None, secrets: set[str]) -> str | None:
    """A remote worker's command output as the attempt keeps it: the rule a cronwheel
    worker's follows (cronwheel.security.output), so that no secret of the command is
    stored in clear and no more than 64 KiB of each stream is kept. Refused for another
    action: only a command run has an output to show."""
    if sent is None:
        return None
    kind = claimed.action.get("type")
    if kind != "command":
        raise InvalidInput(
            "output",
            f"only a command run has an output; run {claimed.run.id} is a {kind} run:"
            " leave output out (an error goes in error_class and error_message)",
        )
    return output_record(
        sent.exit_code,
        sent.signal,
        kept_text(sent.stdout, secrets),
        kept_text(sent.stderr, secrets),
    )


def _report(run_id: int, progress: ProgressIn | None, checkpoint: CheckpointIn | None) -> RunReport:
    return RunReport(
        run_id,
        None if progress is None else progress.fraction,
        None if progress is None else progress.message,
        None if checkpoint is None else checkpoint_text(checkpoint.state),
    )


async def _run(state: ApiState, principal: Principal, run_id: int) -> Run:
    run = await state.store.get_run(principal.tenant_id, run_id)
    if run is None:
        raise NotFound("run", run_id)
    return run


async def _held_run(
    state: ApiState, principal: Principal, run_id: int, owner: str, fence: int
) -> Run:
    """The run, if this worker still holds it under ``fence``; 409 otherwise."""
    run = await _run(state, principal, run_id)
    if run.state is not RunState.RUNNING or run.fence != fence or run.lease_owner != owner:
        raise _stale(run, fence)
    return run


def _stale(run: Run, fence: int) -> Conflict:
    return Conflict(
        "fence",
        f"the run is no longer yours (sent fence {fence}; the run is {run.state.value}"
        f" at fence {run.fence}): stop it and do not retry the completion",
    )


async def _as_claimed(state: ApiState, principal: Principal, run: Run) -> ClaimedRun:
    """The run as its worker executes it: a pipeline task's own policies decide its retry
    here too (lifecycle.claimed_run), as they do for an in-process worker."""
    job = await state.store.get_job(principal.tenant_id, run.job_id)
    if job is None:
        raise NotFound("job", run.job_id)
    return claimed_run(
        run,
        job_name=job.name,
        action=job.action,
        payload=job.payload,
        retry=job.retry,
        timeout_seconds=job.timeout_seconds,
        delivery=job.delivery,
        traceparent=job.traceparent,
    )


@router.get(
    "/v1/workers",
    response_model=WorkerItems,
    responses=problems(),
    summary="Workers seen in the last minute",
)
async def list_workers(request: Request, principal: WorkerWatcher) -> Any:
    """The tenant's own remote workers, then the in-process workers every tenant shares
    (``shared``: their host and load are shown to system admins only)."""
    state = api_state(request)
    since = state.clock.now() - SEEN_WINDOW
    own = await state.store.list_workers(principal.tenant_id, seen_since=since)
    shared = await state.store.list_workers(SHARED_WORKERS, seen_since=since)
    prefix = f"{principal.tenant_id}/"
    items = [WorkerOut.of(w, w.id.removeprefix(prefix)) for w in own]
    items += [WorkerOut.of_shared(w, full=principal.system_admin) for w in shared]
    return dump(WorkerItems(items=items))


def _client_host(request: Request) -> str:
    return request.client.host if request.client else "unknown"


async def _claim(
    store: Store,
    rates: Mapping[str, float],
    owner: str,
    body: ClaimIn,
    now: datetime,
    tenant_id: str,
) -> Claim:
    """The pools without a rate limit in one claim; each rate-limited pool (decision
    0033) on its own, as many as its cluster-wide bucket grants (given back if fewer
    were due)."""
    free = [p for p in body.pools if p not in rates]
    left = body.capacity
    found = Claim()

    async def take(pools: list[str], limit: int) -> Claim:
        return await store.claim_runs(
            owner,
            pools,
            limit=limit,
            now=now,
            prefetch_until=now,
            lease_seconds=body.lease_seconds,
            tenant_id=tenant_id,
        )

    if free:
        found = await take(free, left)
        left -= len(found)
    for pool in (p for p in body.pools if p in rates):
        if left <= 0:
            break
        granted = await store.take_pool_tokens(pool, left, now=now)
        if granted is None:  # the limit was removed meanwhile
            granted = left
        if granted <= 0:
            continue
        more = await take([pool], granted)
        if len(more) < granted:
            await store.take_pool_tokens(pool, len(more) - granted, now=now)
        found = Claim([*found, *more], overlap_skipped=found.overlap_skipped + more.overlap_skipped)
        left -= len(more)
    return found
