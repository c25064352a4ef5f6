"""A pipeline run as a person reads it (cronwheel.core.pipelines.progress, the CLI's tree in
cronwheel.cli.pipeline_view): every task of the definition, waiting ones included, in
dependency order, under the task it waits for that runs last; fan-outs counted by state;
80 columns on a terminal, one line per task in a pipe."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from cronwheel.cli.pipeline_view import run_lines
from cronwheel.core.pipelines.progress import layers, progress, tree

RUN_ID = "01a20fb1-2a31-7000-a6cc-ed0f31ac26b2"
LONG = "notify-the-whole-team-that-the-nightly-load-has-finished-one-way-or-another"[:64]


def handler(name: str, **extra: Any) -> dict[str, Any]:
    return {"action": {"type": "handler", "name": name}, **extra}


PIPELINE = {
    "name": "nightly-etl",
    "tasks": {
        "extract": handler("extract"),
        "clean": handler("clean"),
        "split": handler("split"),
        "square": handler("square", fan_out={"max": 100}),
        "sum": handler("sum"),
        "load": handler("load"),
        "cleanup": handler("cleanup"),
        LONG: handler("notify"),
    },
    "edges": [
        {"from": "extract", "to": "clean", "on": "on_success"},
        {"from": "extract", "to": "split", "on": "on_success"},
        {"from": "split", "to": "square", "on": "on_success"},
        {"from": "square", "to": "sum", "on": "on_success"},
        {"from": "sum", "to": "load", "on": "on_success"},
        {"from": "clean", "to": "load", "on": "on_success"},
        {"from": "load", "to": "cleanup", "on": "on_failure"},
        {"from": "load", "to": LONG, "on": "on_finished"},
    ],
}


def row(task: str, state: str, run_id: int | None, **extra: Any) -> dict[str, Any]:
    return {"task": task, "instance": 0, "state": state, "run_id": run_id, **extra}


def squares(succeeded: int, running: int) -> list[dict[str, Any]]:
    return [
        {
            "task": "square",
            "instance": i,
            "state": "succeeded" if i < succeeded else "started",
            "run_state": "running",
            "run_id": 100 + i,
        }
        for i in range(succeeded + running)
    ]


ROWS = [
    row("extract", "succeeded", 1),
    row("clean", "started", 2, run_state="running"),
    row("split", "succeeded", 3),
    *squares(98, 2),
]
RUN = {
    "id": RUN_ID,
    "pipeline_id": "01a20fb1-2a31-7000-a6cc-ed0f31ac26b3",
    "version": 2,
    "state": "running",
    "cancel_requested": False,
    "actor": "key:ops",
    "created_at": "2026-11-24T22:33:19.833335+00:00",
    "finished_at": None,
    "trigger_run_id": None,
    "tasks": ROWS,
}


def test_every_task_in_dependency_order_with_its_state_and_depth() -> None:
    tasks = progress(PIPELINE, ROWS)
    assert [(t.name, t.state, t.depth) for t in tasks] == [
        ("extract", "succeeded", 0),
        ("clean", "running", 1),
        ("split", "succeeded", 1),
        ("square", "running", 2),
        ("sum", "waiting", 3),
        ("load", "waiting", 4),
        ("cleanup", "waiting", 5),
        (LONG, "waiting", 5),
    ]
    square = tasks[3]
    assert square.expanded and square.run_id is None and len(square.instances) == 100
    assert square.summary() == "98 succeeded, 2 running"
    assert tasks[0].run_id == 1 and not tasks[0].expanded
    assert [[t.name for t in layer] for layer in layers(tasks)][:2] == [
        ["extract"],
        ["clean", "split"],
    ]


def test_a_fan_out_that_could_not_expand_reads_as_one_task() -> None:
    rows = [
        row("extract", "succeeded", 1),
        row("split", "succeeded", 3),
        row("square", "dead", None, reason="fan_out_invalid", message="tasks.split returned dict"),
    ]
    square = progress(PIPELINE, rows)[3]
    assert (square.state, square.reason, square.expanded) == ("dead", "fan_out_invalid", False)
    assert square.message == "tasks.split returned dict"
    lines = run_lines({**RUN, "tasks": rows}, PIPELINE, None)
    [shown] = [line for line in lines if "square" in line]
    assert shown.endswith("square  dead (fan_out_invalid)  tasks.split returned dict")


def test_a_task_sits_under_the_parent_that_runs_last_and_names_the_others() -> None:
    nodes = list(tree(progress(PIPELINE, ROWS)))
    load = next(n for n in nodes if n.task.name == "load")
    assert load.also_after == (("clean", "on_success"),)
    parent_of = {}
    stack: list[str] = []
    for node in nodes:
        del stack[node.level :]
        parent_of[node.task.name] = stack[-1] if stack else None
        stack.append(node.task.name)
    assert parent_of == {
        "extract": None,
        "clean": "extract",
        "split": "extract",
        "square": "split",
        "sum": "square",
        "load": "sum",
        "cleanup": "load",
        LONG: "load",
    }
    assert next(n for n in nodes if n.task.name == "cleanup").edge == "on_failure"


def test_the_tree_at_80_columns() -> None:
    lines = run_lines(RUN, PIPELINE, 80)
    assert max(len(line) for line in lines) <= 80
    assert lines[:8] == [
        f"pipeline run:    {RUN_ID}",
        "pipeline:        nightly-etl (version 2)",
        "pipeline id:     01a20fb1-2a31-7000-a6cc-ed0f31ac26b3",
        "state:           running",
        "started:         2026-11-24T22:33:19.833335+00:00",
        "started by:      key:ops",
        "finished:        not yet",
        "tasks:           8: 2 running, 2 succeeded, 4 waiting",
    ]
    assert lines[8:] == [
        "",
        "extract  succeeded  run 1",
        "├─ clean  running  run 2",
        "└─ split  succeeded  run 3",
        "   └─ square ×100  running (98 succeeded, 2 running)",  # noqa: RUF001 (the multiplication sign is meant)
        "      └─ sum  waiting",
        "         └─ load  waiting",
        "            │  also after: clean",
        "            ├─ cleanup [on_failure]  waiting",
        f"            └─ {LONG}",
        "                  [on_finished]  waiting",
    ]


def test_in_a_pipe_each_task_is_one_whole_line() -> None:
    lines = run_lines(RUN, PIPELINE, None)
    tree_lines = lines[lines.index("") + 1 :]
    assert len(tree_lines) == len(PIPELINE["tasks"])  # type: ignore[arg-type]
    assert "         └─ load  waiting  also after: clean" in tree_lines
    assert f"            └─ {LONG} [on_finished]  waiting" in tree_lines


def test_a_skipped_task_says_why_and_a_cancel_request_shows() -> None:
    rows = [
        row("extract", "dead", 1),
        row("clean", "skipped", None, reason="upstream_failed"),
    ]
    run = {**RUN, "cancel_requested": True, "tasks": rows}
    lines = run_lines(run, PIPELINE, 80)
    assert "state:           running, cancel requested" in lines
    assert "extract  dead  run 1" in lines
    assert "├─ clean  skipped (upstream_failed)" in lines
    assert "└─ split  waiting" in lines


def test_without_the_definition_the_run_still_shows() -> None:
    lines = run_lines(RUN, None, 80)
    assert lines[-1] == "tasks:           the pipeline's definition could not be read"
    assert "pipeline:        version 2" in lines


def test_a_name_wider_than_the_room_left_is_folded_never_cut() -> None:
    lines = run_lines(RUN, PIPELINE, 40)
    assert max(len(line) for line in lines[lines.index("") :]) <= 40  # ids are never cut
    start = next(i for i, line in enumerate(lines) if "└─ notify" in line)
    folded = lines[start][len("            └─ ") :] + "".join(
        line.strip() for line in lines[start + 1 : start + 3]
    )
    assert folded == LONG
    assert lines[start + 3] == "                  [on_finished]  waiting"


def test_the_runs_table_says_when_a_run_started_in_fewer_characters_when_it_must() -> None:
    from datetime import UTC, datetime, timedelta

    from cronwheel.cli.remote.pipelines import RUN_COLUMNS
    from cronwheel.cli.tables import layout

    started = datetime.now(UTC) - timedelta(minutes=4, seconds=5)
    rows = [{"id": RUN_ID, "state": "cancelled", "version": 1, "created_at": started}]
    columns, cells, shown = layout(rows, RUN_COLUMNS, 80)
    assert [columns[i].title for i in shown][:3] == ["id", "state", "started"]
    assert cells[0][2] == "4 min 5 s ago"
    columns, cells, shown = layout(rows, RUN_COLUMNS, 120)
    assert cells[0][2] == started.isoformat()  # whole when there is room


def test_a_long_chain_stops_indenting_at_half_the_width_and_says_what_it_follows() -> None:
    names = [f"step-{i:02}" for i in range(40)]
    chain = {
        "name": "chain",
        "tasks": {n: handler(n) for n in names},
        "edges": [{"from": a, "to": b} for a, b in pairwise(names)],
    }
    run = {**RUN, "tasks": [row("step-00", "succeeded", 1)]}
    lines = run_lines(run, chain, 80)
    tree_lines = lines[lines.index("") + 1 :]
    assert max(len(line) for line in tree_lines) <= 80
    assert tree_lines[0] == "step-00  succeeded  run 1"
    assert tree_lines[1] == "└─ step-01  waiting"
    deepest = [line for line in tree_lines if "step-39" in line]
    assert deepest == [" " * 36 + "└─ step-39  waiting"]
    assert tree_lines[-1] == " " * 42 + "after: step-38"
    # In a pipe the whole tree nests: nothing to keep on a screen.
    piped = run_lines(run, chain, None)
    assert piped[-1] == " " * 114 + "└─ step-39  waiting"
