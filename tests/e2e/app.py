"""Handlers for the real-process tests: ``cronwheel worker --app tests.e2e.app:worker``."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from cronwheel import RunContext, Worker

worker = Worker()
MARKS = Path(os.environ.get("CRONWHEEL_TEST_MARKS", "/tmp/cronwheel-marks"))


def _mark(ctx: RunContext, what: str) -> None:
    MARKS.mkdir(parents=True, exist_ok=True)
    (MARKS / f"{ctx.run_id}-{ctx.attempt}-{what}-{os.getpid()}").touch()


@worker.handler("slow")
def slow(ctx: RunContext) -> None:
    """Marks its start, then works long enough to be killed mid-run."""
    _mark(ctx, "started")
    # the first attempt works long enough to be killed; a retry finishes at once
    deadline = time.monotonic() + (60 if ctx.attempt == 1 else 0.1)
    while time.monotonic() < deadline:
        ctx.heartbeat()
        time.sleep(0.05)
    _mark(ctx, "done")


@worker.handler("deaf")
def deaf(ctx: RunContext) -> None:
    """Marks its start, then works 60 s deaf to cancellation (a sync handler that never
    looks at ``ctx.cancelled``): no grace period is long enough for it."""
    _mark(ctx, "started")
    time.sleep(60)
    _mark(ctx, "done")


@worker.handler("quick")
def quick(ctx: RunContext) -> None:
    _mark(ctx, "done")


@worker.handler("once")
def once(ctx: RunContext) -> None:
    """Appends its start to ``starts.log`` (one line per start, across processes), then
    blocks until it is stopped: the worker's grace period or lease runs out first."""
    MARKS.mkdir(parents=True, exist_ok=True)
    with open(MARKS / "starts.log", "a") as starts:
        starts.write(f"{ctx.run_id} {ctx.attempt} {os.getpid()}\n")
    ctx.cancelled.wait(60)


LONG_ERROR = "the first attempt fails on purpose: " + "a long reason, " * 30 + "\nand a second line"


@worker.handler("fails-once")
def fails_once(ctx: RunContext) -> None:
    """Fails its first attempt with a long, two-line error; a retry succeeds."""
    _mark(ctx, "started")
    if ctx.attempt == 1:
        raise RuntimeError(LONG_ERROR)
    _mark(ctx, "done")


@worker.handler("logs-a-line")
def logs_a_line(ctx: RunContext) -> None:
    """Logs a line of its own: in JSON it carries the run's ids (tests/e2e/test_logs.py)."""
    logging.getLogger("tests.e2e.app").warning("hello from the handler of run %s", ctx.run_id)


RESUMABLE_STEPS = 10


@worker.handler("resumable")
def resumable(ctx: RunContext) -> None:
    """Works through ten steps from its checkpoint, checkpointing after each. Writes the
    checkpoint it started from to ``resumed-<attempt>`` and its steps to
    ``steps-<attempt>``. The first attempt stops at half way (checkpoint ``{"step": 5}``)
    and blocks there, to be killed; a later one resumes from the checkpoint."""
    MARKS.mkdir(parents=True, exist_ok=True)
    (MARKS / f"resumed-{ctx.attempt}").write_text(json.dumps(ctx.checkpoint_state))
    start = ctx.checkpoint_state["step"] if ctx.checkpoint_state else 0
    for step in range(start, RESUMABLE_STEPS):
        if ctx.attempt == 1 and step == RESUMABLE_STEPS // 2:
            ctx.cancelled.wait(60)  # SIGKILLed here
            return
        with open(MARKS / f"steps-{ctx.attempt}", "a") as steps:
            steps.write(f"{step}\n")
        ctx.progress((step + 1) / RESUMABLE_STEPS, f"step {step + 1} of {RESUMABLE_STEPS}")
        ctx.checkpoint({"step": step + 1})


FAN_OUT = 40


@worker.handler("fan-list")
def fan_list(ctx: RunContext) -> list[int]:
    """A pipeline's root: the list its next task fans out over."""
    return list(range(FAN_OUT))


@worker.handler("fan-piece")
def fan_piece(ctx: RunContext) -> int:
    """One instance of the fan-out: marks its start, works a little (long enough for a
    SIGKILL to land mid-piece), marks its end, returns its item."""
    _mark(ctx, "piece-started")
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        ctx.heartbeat()
        time.sleep(0.05)
    _mark(ctx, "piece-done")
    return int(ctx.payload)  # type: ignore[arg-type]


@worker.handler("fan-gather")
def fan_gather(ctx: RunContext) -> int:
    """The fan-in: appends what it got to ``gather.log`` (one line per execution)."""
    MARKS.mkdir(parents=True, exist_ok=True)
    assert ctx.inputs is not None
    with open(MARKS / "gather.log", "a") as log:
        log.write(json.dumps({"run": ctx.run_id, "inputs": ctx.inputs["piece"]}) + "\n")
    return sum(ctx.inputs["piece"])


@worker.handler("held")
def held(ctx: RunContext) -> None:
    """Marks its start, then works for CRONWHEEL_TEST_HOLD seconds (default 0): a worker
    started with a long hold is killed while its runs are going."""
    _mark(ctx, "started")
    deadline = time.monotonic() + float(os.environ.get("CRONWHEEL_TEST_HOLD", "0"))
    while time.monotonic() < deadline:
        time.sleep(0.05)
    _mark(ctx, "done")
