"""Pipeline definitions (issue 16): refused before anything is stored, with the field and
the reason; a cycle named along its path; a valid graph ordered by its edges."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from cronwheel.core.pipelines.definition import (
    MAX_TASKS,
    EdgeCondition,
    FailurePolicy,
    parse_definition,
)
from cronwheel.errors import InvalidInput

HANDLER = {"action": {"type": "handler", "name": "step"}}


def _pipeline(names: str, edges: list[tuple[str, str]], **more: Any) -> dict[str, Any]:
    return {
        "tasks": {name: dict(HANDLER) for name in names},
        "edges": [{"from": a, "to": b} for a, b in edges],
        **more,
    }


def _refused(definition: dict[str, Any]) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        parse_definition(definition)
    return caught.value


def test_a_diamond_is_ordered_by_its_edges() -> None:
    diamond = parse_definition(_pipeline("abcd", [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]))
    order = diamond.order
    assert order[0] == "a" and order[-1] == "d" and set(order[1:3]) == {"b", "c"}
    assert diamond.roots == ("a",)
    assert [e.from_ for e in diamond.upstream["d"]] == ["b", "c"]
    assert diamond.upstream["b"][0].on is EdgeCondition.ON_SUCCESS
    assert diamond.spec.failure_policy is FailurePolicy.STOP
    assert diamond.spec.tasks["a"].retry.max_attempts == 3  # a job's defaults


def test_a_cycle_is_refused_with_its_path() -> None:
    error = _refused(_pipeline("abc", [("a", "b"), ("b", "c"), ("c", "a")]))
    assert error.field == "edges"
    assert error.reason == "a cycle: tasks.a → tasks.b → tasks.c → tasks.a"
    two = _refused(_pipeline("xac", [("x", "c"), ("c", "a"), ("a", "c")]))
    assert two.reason == "a cycle: tasks.c → tasks.a → tasks.c"


@pytest.mark.parametrize(
    ("definition", "field", "words"),
    [
        (_pipeline("ab", [("a", "z")]), "edges.0.to", "'z' is not a task"),
        (_pipeline("ab", [("a", "b"), ("q", "b")]), "edges.1.from", "'q' is not a task"),
        (_pipeline("ab", [("a", "a")]), "edges.0", "cannot wait for itself"),
        (_pipeline("ab", [("a", "b"), ("a", "b")]), "edges.1", "given twice"),
        ({"tasks": {}}, "tasks", "at least 1"),
        ({"tasks": {"bad name": HANDLER}}, "tasks.bad name.[key]", ""),
        ({"tasks": {"a": {"action": {"type": "shell"}}}}, "tasks.a.action", ""),
        (
            {"tasks": {"a": HANDLER}, "edges": [{"from": "a", "to": "a", "on": "sometimes"}]},
            "edges.0.on",
            "",
        ),
        (
            {"tasks": {"a": {**HANDLER, "fan_out": {"max": 10}}}},
            "tasks.a.fan_out",
            "exactly one upstream task",
        ),
        (
            {"tasks": {"a": HANDLER, "b": {**HANDLER, "fan_out": {"max": 10**6}}}},
            "tasks.b.fan_out.max",
            "",
        ),
        ({"tasks": {"a": HANDLER}, "failure_policy": "maybe"}, "failure_policy", ""),
        (
            {"tasks": {"a": {**HANDLER, "concurrency": {"key": "x:{item}", "limit": 1}}}},
            "tasks.a.concurrency.key",
            "placeholder",
        ),
        (
            {"tasks": {"a": {**HANDLER, "concurrency": {"key": "x", "limit": 0}}}},
            "tasks.a.concurrency.limit",
            "",
        ),
    ],
)
def test_a_bad_definition_names_its_field(
    definition: dict[str, Any], field: str, words: str
) -> None:
    error = _refused(definition)
    assert error.field == field, error
    assert words in error.reason


def test_more_tasks_than_the_limit_are_refused() -> None:
    names = [f"t{i}" for i in range(MAX_TASKS + 1)]
    error = _refused({"tasks": {n: HANDLER for n in names}})
    assert error.field == "tasks" and str(MAX_TASKS) in error.reason
    assert parse_definition({"tasks": {n: HANDLER for n in names[:MAX_TASKS]}})


def test_a_long_chain_is_ordered_without_recursion() -> None:
    names = [f"t{i}" for i in range(MAX_TASKS)]
    chain = {
        "tasks": {n: HANDLER for n in names},
        "edges": [{"from": a, "to": b} for a, b in itertools.pairwise(names)],
    }
    assert parse_definition(chain).order == tuple(names)


def test_the_fingerprint_ignores_key_order_and_sees_every_change() -> None:
    one = parse_definition(_pipeline("ab", [("a", "b")]))
    same = parse_definition(
        {
            "edges": [{"on": "on_success", "to": "b", "from": "a"}],
            "tasks": {"b": HANDLER, "a": HANDLER},
        }
    )
    assert one.fingerprint() == same.fingerprint()
    cleanup = _pipeline("ab", [])
    cleanup["edges"] = [{"from": "a", "to": "b", "on": "on_failure"}]
    assert parse_definition(cleanup).fingerprint() != one.fingerprint()
    assert one.to_dict()["edges"] == [{"from": "a", "to": "b", "on": "on_success"}]


def test_a_task_without_a_concurrency_key_keeps_its_fingerprint() -> None:
    """Definitions stored before tasks could name a key (0031) keep their content hash."""
    plain = parse_definition(_pipeline("ab", [("a", "b")]))
    assert all("concurrency" not in t for t in plain.to_dict()["tasks"].values())
    keyed = _pipeline("ab", [("a", "b")])
    keyed["tasks"]["b"] = {**keyed["tasks"]["b"], "concurrency": {"key": "k", "limit": 2}}
    stored = parse_definition(keyed).to_dict()["tasks"]["b"]["concurrency"]
    assert stored == {"key": "k", "limit": 2}
