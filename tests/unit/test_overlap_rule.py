"""The overlap rule (cronwheel/core/overlap.py, decision 0044): when a job is busy, and
what each policy makes of its due run then. The stores are held to it by
``OverlapContract`` (tests/store/test_overlap.py)."""

from __future__ import annotations

import pytest

from cronwheel.core.model import Overlap
from cronwheel.core.overlap import Verdict, busy, displaces, verdict


@pytest.mark.parametrize(
    ("running_runs", "unfinished_pipeline_runs", "expected"),
    [(0, 0, False), (1, 0, True), (0, 1, True), (2, 3, True)],
)
def test_a_job_is_busy_while_a_run_runs_or_a_pipeline_run_is_unfinished(
    running_runs: int, unfinished_pipeline_runs: int, expected: bool
) -> None:
    got = busy(running_runs=running_runs, unfinished_pipeline_runs=unfinished_pipeline_runs)
    assert got is expected


def test_each_policy_against_an_idle_and_a_busy_job() -> None:
    table = {p: (verdict(p, job_busy=False), verdict(p, job_busy=True)) for p in Overlap}
    assert table == {
        Overlap.ALLOW: (Verdict.CLAIM, Verdict.CLAIM),
        Overlap.QUEUE: (Verdict.CLAIM, Verdict.WAIT),
        Overlap.SKIP: (Verdict.CLAIM, Verdict.SKIP),
        Overlap.REPLACE: (Verdict.CLAIM, Verdict.DISPLACE),
    }


def test_only_replace_displaces() -> None:
    assert [p for p in Overlap if displaces(p)] == [Overlap.REPLACE]
