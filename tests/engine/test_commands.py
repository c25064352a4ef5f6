"""Command runs (issue 30 item 1): real child processes, run by a real worker on a store.

The worker runs each command under its supervisor (cronwheel.actions._lifeline), in a
process group of its own; these tests look at the processes themselves: a grandchild
left behind by a timeout or a cancel must be gone."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from cronwheel.control.service import JobService
from cronwheel.core.model import AttemptOutcome, RetryPolicy, RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.redact import mask_action
from cronwheel.security.sealing import Sealer, generate_key, is_sealed
from cronwheel.store.base import Store
from tests.engine.helpers import eventually, job_with_run, one_run, running
from tests.engine.test_worker import FAST

SH = "/bin/sh"
CONFIG = dataclasses.replace(FAST, allow_commands=(SH,), command_grace_seconds=0.5)
RETRY = RetryPolicy(max_attempts=3, initial_delay=0.05, max_delay=0.05)


def sh(script: str, **extra: Any) -> dict[str, Any]:
    return {"type": "command", "argv": [SH, "-c", script], **extra}


def gone(pid: int) -> bool:
    """Whether a process is gone: no such process, or a zombie nobody reaped yet (this
    machine's init may not reap)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _read_pid(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return int(text) if text.endswith("\n") else None


async def _pid_in(path: Path) -> int:
    async def written() -> int | None:
        return _read_pid(path)

    return int(await eventually(written))


async def _finished(store: Store, job_id: str) -> Any:
    async def done() -> Any:
        run = await one_run(store, job_id)
        return run if run.state in (RunState.SUCCEEDED, RunState.DEAD, RunState.CANCELLED) else None

    return await eventually(done)


def _output(attempt: Any) -> dict[str, Any]:
    assert attempt.output is not None
    found: dict[str, Any] = json.loads(attempt.output)
    return found


async def test_a_command_succeeds_with_its_output_env_and_envelope_kept(store: Store) -> None:
    script = 'echo "run $CRONWHEEL_RUN_ID attempt $CRONWHEEL_ATTEMPT in $PWD"; cat; echo oops >&2'
    job, _ = await job_with_run(store, action=sh(script, cwd="/tmp"), payload={"n": 7})
    assert await Worker(store, CONFIG).run_once() == 1
    run = await one_run(store, job.id)
    assert run.state is RunState.SUCCEEDED
    [attempt] = await store.list_attempts("default", run.id)
    output = _output(attempt)
    first, envelope = output["stdout"].split("\n", 1)
    assert first == f"run {run.id} attempt 1 in /tmp"
    assert json.loads(envelope)["payload"] == {"n": 7}
    assert (output["exit_code"], output["stderr"]) == (0, "oops\n")


async def test_a_non_zero_exit_is_retried_under_the_job_policy(store: Store) -> None:
    script = 'echo "try $CRONWHEEL_ATTEMPT" >&2; [ "$CRONWHEEL_ATTEMPT" = 2 ] || exit 3'
    job, _ = await job_with_run(store, action=sh(script), retry=RETRY)
    async with running(Worker(store, CONFIG)):
        run = await _finished(store, job.id)
    assert run.state is RunState.SUCCEEDED
    first, second = await store.list_attempts("default", run.id)
    assert (first.outcome, first.error_class) == (AttemptOutcome.FAILED, "ExitCode")
    assert first.error_message == f"{SH} exited with code 3: try 1"
    assert _output(first)["exit_code"] == 3
    assert second.outcome is AttemptOutcome.SUCCEEDED


async def test_a_permanent_exit_code_goes_straight_to_the_dead_letter(store: Store) -> None:
    job, _ = await job_with_run(
        store, action=sh("exit 4", permanent_exit_codes=[4, 5]), retry=RETRY
    )
    async with running(Worker(store, CONFIG)):
        run = await _finished(store, job.id)
    assert run.state is RunState.DEAD
    [attempt] = await store.list_attempts("default", run.id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.PERMANENT, "ExitCode")


async def test_a_timeout_stops_the_whole_group_a_grandchild_and_a_term_ignorer_too(
    store: Store, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild"
    # The shell ignores SIGTERM (SIGKILL after the grace ends it); its grandchild sleeps.
    script = f'trap "" TERM; sleep 300 & echo $! > {pid_file}; echo started; wait'
    job, _ = await job_with_run(
        store,
        action=sh(script, timeout_seconds=1.0),
        timeout_seconds=60.0,
        retry=RetryPolicy(max_attempts=1),
    )
    async with running(Worker(store, CONFIG)):
        grandchild = await _pid_in(pid_file)
        run = await _finished(store, job.id)
    assert run.state is RunState.DEAD
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT
    assert "timeout of 1 s" in (attempt.error_message or "")
    assert _output(attempt)["stdout"] == "started\n"
    assert gone(grandchild)


async def test_the_job_timeout_stops_the_group_and_keeps_the_output(
    store: Store, tmp_path: Path
) -> None:
    pid_file = tmp_path / "grandchild"
    script = f"sleep 300 & echo $! > {pid_file}; echo started; wait"
    job, _ = await job_with_run(
        store, action=sh(script), timeout_seconds=1.0, retry=RetryPolicy(max_attempts=1)
    )
    async with running(Worker(store, CONFIG)):
        grandchild = await _pid_in(pid_file)
        run = await _finished(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT
    assert _output(attempt)["stdout"] == "started\n"
    assert gone(grandchild)


async def test_a_cancel_stops_the_whole_group(store: Store, tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild"
    script = f"sleep 300 & echo $! > {pid_file}; echo started; wait"
    job, _ = await job_with_run(store, action=sh(script))
    async with running(Worker(store, CONFIG)):
        grandchild = await _pid_in(pid_file)
        running_run = await one_run(store, job.id)
        await JobService(store).cancel_run(running_run.id)
        run = await _finished(store, job.id)
    assert run.state is RunState.CANCELLED
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert _output(attempt)["stdout"] == "started\n"
    assert gone(grandchild)


async def test_what_a_command_leaves_in_its_group_is_stopped_when_it_exits(
    store: Store, tmp_path: Path
) -> None:
    pid_file = tmp_path / "left"
    job, _ = await job_with_run(store, action=sh(f"sleep 300 & echo $! > {pid_file}"))
    assert await Worker(store, CONFIG).run_once() == 1
    assert (await one_run(store, job.id)).state is RunState.SUCCEEDED
    assert gone(int(pid_file.read_text()))


async def test_the_output_kept_is_the_last_64_kib_of_each_stream(store: Store) -> None:
    # 200,000 bytes of numbered lines, then an end marker.
    script = "i=0; while [ $i -lt 20000 ]; do echo 12345678 $i; i=$((i+1)); done; echo END"
    job, _ = await job_with_run(store, action=sh(f"{{ {script}; }} | tr -d ' '"))
    assert await Worker(store, CONFIG).run_once() == 1
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    stdout = _output(attempt)["stdout"]
    marker, kept = stdout.split("\n", 1)
    assert marker.startswith("[… ") and marker.endswith(" bytes before this not kept …]")
    assert len(kept.encode()) == 64 * 1024
    assert kept.endswith("1234567819999\nEND\n")


async def test_a_command_this_worker_does_not_allow_is_not_run(
    store: Store, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    job, _ = await job_with_run(
        store,
        action={"type": "command", "argv": ["/usr/bin/touch", str(marker)]},
        retry=RetryPolicy(max_attempts=1),
    )
    assert await Worker(store, CONFIG).run_once() == 1
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    assert attempt.error_class == "CommandNotAllowed"
    assert not marker.exists()


async def test_a_worker_without_patterns_runs_no_command(store: Store) -> None:
    job, _ = await job_with_run(store, action=sh("exit 0"), retry=RetryPolicy(max_attempts=1))
    assert await Worker(store, FAST).run_once() == 1
    [attempt] = await store.list_attempts("default", (await one_run(store, job.id)).id)
    assert attempt.error_class == "CommandNotAllowed"


async def test_secret_env_is_sealed_at_rest_shown_masked_and_redacted_from_output(
    store: Store,
) -> None:
    sealer = Sealer([generate_key()])
    token = "tok-5ecret-value-42"
    job = await JobService(store, sealer=sealer).create(
        name="dump",
        schedule={"kind": "immediate"},
        action=sh(
            'echo "token=$API_TOKEN plain=$REGION"', env={"API_TOKEN": token, "REGION": "eu"}
        ),
    )
    stored = job.action["env"]
    assert is_sealed(stored["API_TOKEN"]) and stored["REGION"] == "eu"
    assert mask_action(job.action)["env"] == {"API_TOKEN": "***", "REGION": "eu"}
    assert await Worker(store, CONFIG, sealer=sealer).run_once() == 1
    run = await one_run(store, job.id)
    assert run.state is RunState.SUCCEEDED
    [attempt] = await store.list_attempts("default", run.id)
    assert _output(attempt)["stdout"] == "token=*** plain=eu\n"
    assert token not in (attempt.output or "")


async def test_a_pipeline_task_runs_a_command_with_its_inputs_on_stdin(store: Store) -> None:
    from cronwheel.control.pipelines import PipelineService

    service = PipelineService(store)
    worker = Worker(store, CONFIG)
    worker.handler("count")(lambda ctx: 7)
    script = 'echo "task $CRONWHEEL_TASK of $CRONWHEEL_PIPELINE_RUN_ID"; cat'
    definition = {
        "tasks": {
            "count": {"action": {"type": "handler", "name": "count"}},
            "report": {"action": sh(script)},
        },
        "edges": [{"from": "count", "to": "report"}],
    }
    pipeline = await service.create("with-a-command", definition)
    started = await service.start(pipeline.id)

    async def finished() -> Any:
        found = await service.get_run(started.id)
        return found if found.state != "running" else None

    async with running(worker):
        done = await eventually(finished)
    assert done.state == "succeeded"
    [report] = [t for t in done.tasks if t.task == "report"]
    [attempt] = await store.list_attempts("default", report.run_id or 0)
    first, envelope = _output(attempt)["stdout"].split("\n", 1)
    assert first == f"task report of {started.id}"
    assert json.loads(envelope)["inputs"] == {"count": 7}
