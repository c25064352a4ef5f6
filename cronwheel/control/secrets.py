"""Sealing every job's secrets with the current key: ``cronwheel secrets rotate``.

The sealing itself (what is secret, how it is sealed and opened) lives in
:mod:`cronwheel.security.sealing`; this is the operator's action that walks the store
with it, page by page, writing each job only if nobody changed it meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cronwheel.core.model import Job, JobKey
from cronwheel.core.records import JobSecrets
from cronwheel.security.sealing import Sealer, reseal_action, reseal_notify
from cronwheel.store.base import Store


@dataclass(frozen=True, slots=True)
class Rotation:
    """What :func:`rotate` did: jobs read, and jobs whose action was stored again."""

    jobs_read: int
    jobs_resealed: int
    left: int
    """Jobs changed by someone else while being resealed, in every pass: run again."""
    pipeline_versions_resealed: int = 0
    """Pipeline versions whose task actions or notification targets' URLs were stored
    again."""
    task_runs_resealed: int = 0
    """Unfinished pipeline task runs whose action was stored again."""


ROTATE_PAGE = 500
ROTATE_PASSES = 3


async def rotate(
    store: Store, sealer: Sealer, *, now: datetime, actor: str = "secrets-rotate"
) -> Rotation:
    """Seal every job's secrets with ``sealer``'s first key: values sealed with an older
    key are sealed again, and plain secret headers and URL passwords (stored before
    cronwheel encrypted them) are sealed. Each job is written only if its version has
    not changed meanwhile; a job that did change is read again (up to
    :data:`ROTATE_PASSES` passes). Once done, the older keys can be removed."""
    read = resealed = 0
    left = 0
    for tenant in await store.list_tenants():
        after: JobKey | None = None
        while True:
            jobs = await store.list_jobs(tenant.id, after=after, limit=ROTATE_PAGE)
            if not jobs:
                break
            read += len(jobs)
            after = JobKey(jobs[-1].id)
            todo = [j for j in jobs if _resealed(j, sealer) is not None]
            for _ in range(ROTATE_PASSES):
                changes = [c for c in (_resealed(j, sealer) for j in todo) if c is not None]
                if not changes:
                    break
                done = await store.replace_job_actions(tenant.id, changes, actor=actor, now=now)
                resealed += done
                if done == len(changes):
                    todo = []
                    break
                # Some jobs changed meanwhile: read them again.
                fresh = [await store.get_job(tenant.id, c.job_id) for c in changes]
                todo = [j for j in fresh if j is not None]
            left += sum(1 for j in todo if _resealed(j, sealer) is not None)
    # Pipelines: every version's tasks and notification targets, and the actions that
    # unfinished task runs carry (a pending task run sends its webhook later, with
    # whatever key is left then).
    versions, task_runs = await store.reseal_pipelines(
        lambda tenant_id, action: reseal_action(action, tenant_id, sealer)
    )
    return Rotation(read, resealed, left, versions, task_runs)


def _resealed(job: Job, sealer: Sealer) -> JobSecrets | None:
    """The job's action and notification targets on the first key, or None if they are
    already (nothing secret, or nothing to change)."""
    action = reseal_action(job.action, job.tenant_id, sealer)
    notify = reseal_notify(job.notify, job.tenant_id, sealer) if job.notify else None
    if action is None and notify is None:
        return None
    return JobSecrets(
        job.id,
        job.version,
        job.action if action is None else action,
        tuple(job.notify) if notify is None else notify,
    )
