"""The API's ASGI application: :func:`create_app` wires the routes, the guards, the
problem handlers and the OpenAPI document around a store the caller owns."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from cronwheel import dashboard
from cronwheel._version import installed_version
from cronwheel.api import docs_ui, openapi
from cronwheel.api.guards import RequestGuard
from cronwheel.api.idempotency import prune
from cronwheel.api.reads import ReplicaReadsForGets
from cronwheel.api.routes import (
    admin,
    audit,
    health,
    jobs,
    metrics,
    notifications,
    pipeline_runs,
    pipelines,
    pools,
    runs,
    schedules,
    status,
    why,
    workers,
)
from cronwheel.core.clock import Clock, SystemClock, sync_to
from cronwheel.core.jobspec import MAX_PAYLOAD_BYTES
from cronwheel.observability.metrics import ApiMetrics, store_reader
from cronwheel.security.egress import EgressPolicy
from cronwheel.security.sealing import Sealer
from cronwheel.store.base import Store
from cronwheel.web import problems
from cronwheel.web.auth import AuthConfig
from cronwheel.web.notices import Notices
from cronwheel.web.quotas import Quotas, TenantDefaults
from cronwheel.web.state import ApiState

log = logging.getLogger("cronwheel.api")

MAX_BODY = 4 * MAX_PAYLOAD_BYTES
"""A single request's body: room for a job with the largest payload, escaped."""
MAX_BATCH_BODY = 10 * 1024 * 1024
"""``POST /v1/jobs/batch``: 10,000 jobs of about 1 KiB (a job with every policy set and a
small payload is 870 bytes), or fewer larger ones (decision 0036)."""
MAX_ENQUEUE_BODY = 4 * 1024 * 1024
"""``POST /v1/jobs/{job_id}/runs``: 10,000 payloads of about 400 bytes, or fewer larger
ones (decision 0036)."""
BODY_LIMITS = {"/v1/jobs/batch": MAX_BATCH_BODY, "/v1/jobs/{job_id}/runs": MAX_ENQUEUE_BODY}
"""The routes that take up to 10,000 items in one body, and their limits."""
HOUSEKEEPING_SECONDS = 60.0

DESCRIPTION = """cronwheel's HTTP API: jobs, runs, the dead-letter queue, remote workers,
tenants and keys. Errors are `application/problem+json`. See docs/api.md."""


def create_app(
    store: Store,
    *,
    auth: AuthConfig,
    clock: Clock | None = None,
    metrics_tenant_labels: bool = False,
    egress: EgressPolicy | None = None,
    tenant_defaults: TenantDefaults | None = None,
    sealer: Sealer | None = None,
) -> FastAPI:
    """The API over ``store``, which the caller opened and migrated, and closes.
    ``metrics_tenant_labels``: ``/metrics`` counts dead runs per tenant. ``egress``: the
    webhook targets allowed beyond the public internet (default: env
    ``CRONWHEEL_WEBHOOK_ALLOW``'s), refused at creation otherwise (docs/security.md).
    ``tenant_defaults``: the limits of a tenant created without them (default: none).
    ``sealer``: encrypts secret webhook headers (default: env ``CRONWHEEL_SECRETS_KEY``'s;
    none: such headers are refused)."""
    app = FastAPI(
        title="cronwheel",
        version=installed_version(),
        description=DESCRIPTION,
        lifespan=_lifespan,
        docs_url=None,  # docs_ui serves /docs from the package, not from a CDN
        redoc_url=None,
    )
    clock = clock or SystemClock()
    egress = egress or EgressPolicy.from_env()
    sealer = sealer or Sealer.from_env()
    app.state.api = ApiState(
        store,
        auth,
        clock,
        Quotas(store, clock),
        Notices(store, clock),
        egress,
        tenant_defaults or TenantDefaults(),
        sealer,
    )
    app.state.metrics = ApiMetrics(
        store_reader(store, clock=clock), tenant_labels=metrics_tenant_labels
    )
    problems.install(app)
    modules = (
        health,
        metrics,
        jobs,
        pipelines,
        pipeline_runs,
        pools,
        why,
        schedules,
        runs,
        notifications,
        workers,
        status,
        admin,
        audit,
    )
    for module in modules:
        app.include_router(module.router)
    openapi.install(app)
    docs_ui.install(app)
    dashboard.install(app)
    app.add_middleware(ReplicaReadsForGets)  # lists from a read replica (decision 0030)
    app.add_middleware(
        RequestGuard,
        default_limit=MAX_BODY,
        limits=BODY_LIMITS,
    )
    return app


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Under a server: keep the clock on the store's, and forget old idempotent answers."""
    state: ApiState = app.state.api
    task = asyncio.create_task(_housekeeping(state), name="api-housekeeping")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _housekeeping(state: ApiState) -> None:
    while True:
        try:
            await sync_to(state.clock, state.store.now)
            await prune(state.store, state.clock.now())
        except Exception:  # the store is down: requests say so (503); try again later
            log.warning("API housekeeping failed; retrying", exc_info=True)
        await asyncio.sleep(HOUSEKEEPING_SECONDS)
