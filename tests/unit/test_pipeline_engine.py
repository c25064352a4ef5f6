"""The pure rule that says what a pipeline run does next (cronwheel.core.pipelines.engine)."""

from __future__ import annotations

from typing import Any

from cronwheel.core.pipelines.definition import parse_definition
from cronwheel.core.pipelines.engine import (
    PipelineRunState,
    TaskRow,
    TaskState,
    plan,
)

H = {"type": "handler", "name": "h"}


def _definition(edges: list[dict[str, Any]], *tasks: str, **extra: Any) -> Any:
    spec: dict[str, Any] = {"tasks": {t: {"action": H} for t in tasks}, "edges": edges}
    for name, task in extra.pop("task_extra", {}).items():
        spec["tasks"][name].update(task)
    spec.update(extra)
    return parse_definition(spec)


DIAMOND = _definition(
    [
        {"from": "a", "to": "b"},
        {"from": "a", "to": "c"},
        {"from": "b", "to": "d"},
        {"from": "c", "to": "d"},
    ],
    "a",
    "b",
    "c",
    "d",
)


def test_a_new_run_starts_its_roots_only() -> None:
    p = plan(DIAMOND, {})
    assert [(s.task, s.instance) for s in p.start] == [("a", 0)]
    assert p.skip == [] and p.ending is None


def test_the_fan_in_waits_for_every_prerequisite_and_gets_their_results() -> None:
    rows = {
        ("a", 0): TaskRow(TaskState.SUCCEEDED, result=1),
        ("b", 0): TaskRow(TaskState.SUCCEEDED, result="B"),
        ("c", 0): TaskRow(TaskState.STARTED),
    }
    assert plan(DIAMOND, rows).start == []
    rows[("c", 0)] = TaskRow(TaskState.SUCCEEDED, result=["C"])
    (d,) = plan(DIAMOND, rows).start
    assert (d.task, d.inputs) == ("d", {"b": "B", "c": ["C"]})


def test_a_dead_task_skips_its_children_and_fails_the_run() -> None:
    rows = {
        ("a", 0): TaskRow(TaskState.SUCCEEDED),
        ("b", 0): TaskRow(TaskState.DEAD),
        ("c", 0): TaskRow(TaskState.SUCCEEDED),
    }
    p = plan(DIAMOND, rows)
    assert [(s.task, s.reason) for s in p.skip] == [("d", "upstream_failed")]
    assert p.ending is PipelineRunState.FAILED


def test_stop_policy_starts_nothing_new_after_an_unhandled_failure() -> None:
    rows = {("a", 0): TaskRow(TaskState.SUCCEEDED), ("b", 0): TaskRow(TaskState.DEAD)}
    # c has not started yet (say its run was never created): stop skips it.
    p = plan(DIAMOND, rows)
    assert {(s.task, s.reason) for s in p.skip} == {
        ("c", "pipeline_stopped"),
        ("d", "upstream_failed"),
    }
    assert p.ending is PipelineRunState.FAILED
    go_on = _definition(
        [
            {"from": "a", "to": "b"},
            {"from": "a", "to": "c"},
            {"from": "b", "to": "d"},
            {"from": "c", "to": "d"},
        ],
        "a",
        "b",
        "c",
        "d",
        failure_policy="continue",
    )
    p = plan(go_on, rows)
    assert [s.task for s in p.start] == ["c"]
    assert p.ending is None


def test_an_on_failure_edge_runs_cleanup_only_when_its_upstream_failed() -> None:
    d = _definition(
        [{"from": "a", "to": "cleanup", "on": "on_failure"}, {"from": "a", "to": "next"}],
        "a",
        "cleanup",
        "next",
    )
    failed = plan(d, {("a", 0): TaskRow(TaskState.DEAD)})
    assert [s.task for s in failed.start] == ["cleanup"]
    assert [(s.task, s.reason) for s in failed.skip] == [("next", "upstream_failed")]
    ok = plan(d, {("a", 0): TaskRow(TaskState.SUCCEEDED)})
    assert [s.task for s in ok.start] == ["next"]
    assert [(s.task, s.reason) for s in ok.skip] == [("cleanup", "upstream_succeeded")]
    # A handled failure does not fail the run.
    done = plan(
        d,
        {
            ("a", 0): TaskRow(TaskState.DEAD),
            ("cleanup", 0): TaskRow(TaskState.SUCCEEDED),
            ("next", 0): TaskRow(TaskState.SKIPPED, "upstream_failed"),
        },
    )
    assert done.ending is PipelineRunState.SUCCEEDED


def test_skips_propagate_down_a_chain_in_one_plan() -> None:
    d = _definition([{"from": "a", "to": "b"}, {"from": "b", "to": "c"}], "a", "b", "c")
    p = plan(d, {("a", 0): TaskRow(TaskState.DEAD)})
    assert [(s.task, s.reason) for s in p.skip] == [
        ("b", "upstream_failed"),
        ("c", "upstream_skipped"),
    ]
    assert p.ending is PipelineRunState.FAILED


def test_a_fan_out_expands_its_parents_list_and_its_child_waits_for_every_instance() -> None:
    d = _definition(
        [{"from": "list", "to": "each"}, {"from": "each", "to": "sum"}],
        "list",
        "each",
        "sum",
        task_extra={"each": {"fan_out": {"max": 5}}},
    )
    p = plan(d, {("list", 0): TaskRow(TaskState.SUCCEEDED, result=[10, 20, 30])})
    assert [(s.task, s.instance, s.payload) for s in p.start] == [
        ("each", 0, 10),
        ("each", 1, 20),
        ("each", 2, 30),
    ]
    rows = {
        ("list", 0): TaskRow(TaskState.SUCCEEDED, result=[10, 20, 30]),
        ("each", 0): TaskRow(TaskState.SUCCEEDED, result=11),
        ("each", 1): TaskRow(TaskState.STARTED),
        ("each", 2): TaskRow(TaskState.SUCCEEDED, result=31),
    }
    assert plan(d, rows).start == []
    rows[("each", 1)] = TaskRow(TaskState.SUCCEEDED, result=21)
    (total,) = plan(d, rows).start
    assert total.inputs == {"each": [11, 21, 31]}


def test_a_fan_out_over_too_many_items_or_no_list_fails_and_over_none_skips() -> None:
    d = _definition(
        [{"from": "list", "to": "each"}],
        "list",
        "each",
        task_extra={"each": {"fan_out": {"max": 2}}},
    )
    (bad,) = plan(d, {("list", 0): TaskRow(TaskState.SUCCEEDED, result=[1, 2, 3])}).skip
    assert (bad.state, bad.reason) == (TaskState.DEAD, "fan_out_invalid")
    assert bad.message == "tasks.list returned 3 items; tasks.each.fan_out.max is 2"
    (odd,) = plan(d, {("list", 0): TaskRow(TaskState.SUCCEEDED, result={"a": 1})}).skip
    assert odd.message == "tasks.list returned dict, not a list to fan out over"
    empty = plan(d, {("list", 0): TaskRow(TaskState.SUCCEEDED, result=[])})
    assert [(s.state, s.reason) for s in empty.skip] == [(TaskState.SKIPPED, "fan_out_empty")]
    assert empty.ending is PipelineRunState.SUCCEEDED


def test_a_cancelled_run_starts_nothing_and_ends_cancelled_once_all_finished() -> None:
    rows = {("a", 0): TaskRow(TaskState.SUCCEEDED), ("b", 0): TaskRow(TaskState.STARTED)}
    p = plan(DIAMOND, rows, cancelled=True)
    assert p.start == []
    assert [(s.task, s.reason) for s in p.skip] == [
        ("c", "pipeline_cancelled"),
        ("d", "upstream_skipped"),
    ]
    assert p.ending is None  # b still runs
    rows[("b", 0)] = TaskRow(TaskState.CANCELLED)
    rows[("c", 0)] = TaskRow(TaskState.SKIPPED, "pipeline_cancelled")
    rows[("d", 0)] = TaskRow(TaskState.SKIPPED, "upstream_skipped")
    assert plan(DIAMOND, rows, cancelled=True).ending is PipelineRunState.CANCELLED
