"""Decision 0025 under SIGKILL with real processes: workers and a scheduler killed in
the middle of a fan-out and its fan-in; every task still starts once per pipeline run,
none is lost, and the fan-in gets every instance's result."""

from __future__ import annotations

import json
import signal
import subprocess
from contextlib import ExitStack
from pathlib import Path

import pytest

import cronwheel
from cronwheel.control.pipelines import PipelineService
from cronwheel.core.model import DEFAULT_TENANT
from tests.e2e.app import FAN_OUT
from tests.e2e.procs import cronwheel as cronwheel_proc
from tests.engine.helpers import eventually

# Crashes, races between processes and what each store keeps differ by store: this
# file runs on both whatever CRONWHEEL_TEST_STORE says (tests/tiers.py).
pytestmark = pytest.mark.both_stores

WORKER = ["worker", "--app", "tests.e2e.app:worker", "--lease", "2", "--concurrency", "4"]

DEFINITION = {
    "tasks": {
        "list": {"action": {"type": "handler", "name": "fan-list"}},
        "piece": {
            "action": {"type": "handler", "name": "fan-piece"},
            "fan_out": {"max": FAN_OUT},
            "retry": {"max_attempts": 10, "initial_delay": 0.05, "max_delay": 0.1},
        },
        "gather": {
            "action": {"type": "handler", "name": "fan-gather"},
            "retry": {"max_attempts": 10, "initial_delay": 0.05, "max_delay": 0.1},
        },
    },
    "edges": [{"from": "list", "to": "piece"}, {"from": "piece", "to": "gather"}],
}


def _count(marks: Path, what: str) -> int:
    return sum(1 for m in marks.iterdir() if f"-{what}-" in m.name)


async def test_workers_and_a_scheduler_killed_mid_fan_in_start_no_task_twice(
    store_url: str, marks: Path, tmp_path: Path
) -> None:
    env = {"CRONWHEEL_TEST_MARKS": str(marks)}
    logs = iter(range(100))

    def start(*command: str) -> subprocess.Popen[bytes]:
        return stack.enter_context(
            cronwheel_proc(*command, "--db", store_url, env=env, log=tmp_path / f"{next(logs)}.log")
        )

    async with await cronwheel.connect(store_url) as cw:
        service = PipelineService(cw.store)
        pipeline = await service.create("fan", DEFINITION)
        started = await service.start(pipeline.id)
        with ExitStack() as stack:
            workers = [start(*WORKER) for _ in range(3)]
            scheduler = start("scheduler")
            # Kill a worker each time another quarter of the pieces has started, and
            # the scheduler once, replacing each: kills land mid-piece and mid-fan-in.
            for quarter in (1, 2, 3):
                await eventually(
                    lambda q=quarter: _at_least(marks, "piece-started", q * FAN_OUT // 4),
                    timeout=120,
                )
                victim = workers.pop(0)
                victim.send_signal(signal.SIGKILL)
                victim.wait(timeout=30)
                workers.append(start(*WORKER))
                if quarter == 2:
                    scheduler.send_signal(signal.SIGKILL)
                    scheduler.wait(timeout=30)
                    scheduler = start("scheduler")
            done = await eventually(lambda: _finished(service, started.id), timeout=180)
        runs = await cw.store.list_runs(DEFAULT_TENANT, job_id=done.job_id, limit=1000)
    assert done.state == "succeeded", done
    by_task: dict[str, list[int]] = {}
    for run in runs:
        by_task.setdefault(run.task or "", []).append(run.id)
    # One run per task instance, whatever was killed: nothing started twice or lost.
    assert {task: len(ids) for task, ids in by_task.items()} == {
        "list": 1,
        "piece": FAN_OUT,
        "gather": 1,
    }
    # The kills did land mid-piece: some piece's first attempt was lost with its worker.
    assert any(run.attempt > 1 for run in runs if run.task == "piece")
    pieces = [t for t in done.tasks if t.task == "piece"]
    assert [t.instance for t in pieces] == list(range(FAN_OUT))
    assert all(t.state == "succeeded" for t in done.tasks)
    # The fan-in's one run got every instance's result, in instance order (it may have
    # executed again if its worker was killed mid-run: at least once, as any run).
    gathered = [json.loads(line) for line in (marks / "gather.log").read_text().splitlines()]
    assert {g["run"] for g in gathered} == set(by_task["gather"])
    assert all(g["inputs"] == list(range(FAN_OUT)) for g in gathered)


async def _at_least(marks: Path, what: str, n: int) -> bool:
    return _count(marks, what) >= n


async def _finished(service: PipelineService, pipeline_run_id: str) -> object:
    found = await service.get_run(pipeline_run_id)
    return found if found.state != "running" else None
