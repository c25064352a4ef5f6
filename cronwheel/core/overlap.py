"""The overlap rule: when a job is busy, and what its policy makes of a due run then.

A job is **busy** for one of its runs while another of its runs is ``running``, or while
a pipeline run that another of its runs started is unfinished (decision 0044): a job
whose action starts a pipeline is doing its work until the last task of that pipeline
run has ended, not only while its trigger runs. The pipeline run started by the run
itself does not count: a trigger retried after it started its pipeline run (its worker
died before completing it) finds that pipeline run again and is not held behind it.

What the policy makes of the job's earliest due run (its head), by :func:`verdict`:

===========  =================  ==========================================
policy       job idle           job busy
===========  =================  ==========================================
``allow``    claim              claim (runs may overlap; not a head at all)
``queue``    claim              wait
``skip``     claim              skip (``skipped``, reason ``overlap``)
``replace``  claim              claim and displace: the running runs are
                                asked to stop, and the pipeline runs the
                                job's other runs started are cancelled
                                when this run starts its own
===========  =================  ==========================================

Both stores decide in their claim's SQL (a batched path, decision 0040), each fragment
naming this module; ``OverlapContract`` (cronwheel/store/conformance/queue/overlap.py)
walks every policy against every way of being busy on both stores and requires the
claim to do what :func:`verdict` says.
"""

from __future__ import annotations

from enum import StrEnum

from cronwheel.core.model import Overlap


class Verdict(StrEnum):
    """What a claim does with a job's due head under its overlap policy."""

    CLAIM = "claim"
    WAIT = "wait"
    """Stays pending, claimed once the job is no longer busy (``queue``)."""
    SKIP = "skip"
    """Recorded ``skipped`` with reason ``overlap`` (lifecycle ``Event.SKIP``)."""
    DISPLACE = "displace"
    """Claimed; what keeps the job busy is asked to stop (``replace``)."""


def busy(*, running_runs: int, unfinished_pipeline_runs: int) -> bool:
    """Whether a job is busy for one of its runs: ``running_runs`` of its other runs are
    running, ``unfinished_pipeline_runs`` pipeline runs started by its other runs (or
    over the API as runs of the job) have not ended (``running``)."""
    return running_runs > 0 or unfinished_pipeline_runs > 0


def verdict(policy: Overlap, *, job_busy: bool) -> Verdict:
    """What a claim does with a due head of a job under ``policy`` (see the module)."""
    if not job_busy or policy is Overlap.ALLOW:
        return Verdict.CLAIM
    return {
        Overlap.QUEUE: Verdict.WAIT,
        Overlap.SKIP: Verdict.SKIP,
        Overlap.REPLACE: Verdict.DISPLACE,
    }[policy]


def displaces(policy: Overlap) -> bool:
    """Whether a run of ``policy`` displaces what keeps its job busy: the job's running
    runs are asked to stop when it is claimed, and the job's other unfinished pipeline
    runs are cancelled when it starts its own (``replace``)."""
    return verdict(policy, job_busy=True) is Verdict.DISPLACE
