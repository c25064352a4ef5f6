"""What a handler reports through its context: progress and checkpoints, checked at the
call, kept until the worker sends them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.actions import RunCancelled, RunContext
from cronwheel.core.model import MAX_CHECKPOINT_BYTES, MAX_PROGRESS_MESSAGE
from cronwheel.errors import InvalidInput


def _ctx(**kw: object) -> RunContext:
    return RunContext(
        run_id=1,
        job_id="j",
        job_name="job",
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
        fence=1,
        payload=None,
        **kw,  # type: ignore[arg-type]
    )


def test_a_checkpoint_is_kept_as_json_and_becomes_the_checkpoint_state() -> None:
    ctx = _ctx(checkpoint_state={"offset": 10})
    state = {"offset": 20, "done": ["a"]}
    ctx.checkpoint(state)
    state["done"].append("b")  # the handler goes on mutating its own object
    assert ctx.checkpoint_state == {"offset": 20, "done": ["a"]}
    assert ctx.take_report() == (None, None, '{"offset":20,"done":["a"]}')
    assert ctx.take_report() == (None, None, None)  # sent: nothing new


def test_a_checkpoint_that_is_not_json_or_too_big_is_refused_at_the_call() -> None:
    ctx = _ctx()
    with pytest.raises(InvalidInput, match="checkpoint: must be JSON"):
        ctx.checkpoint({"when": datetime.now(UTC)})
    with pytest.raises(InvalidInput, match=f"over the limit of {MAX_CHECKPOINT_BYTES}"):
        ctx.checkpoint("x" * MAX_CHECKPOINT_BYTES)
    ctx.checkpoint("x" * (MAX_CHECKPOINT_BYTES - 2))  # the two quotes make the limit
    assert ctx.checkpoint_state == "x" * (MAX_CHECKPOINT_BYTES - 2)


def test_progress_is_a_fraction_and_its_message_is_capped() -> None:
    ctx = _ctx()
    for bad in (-0.1, 1.5, float("nan"), True, "half"):
        with pytest.raises(InvalidInput, match="progress"):
            ctx.progress(bad)  # type: ignore[arg-type]
    ctx.progress(1, "m" * 500)
    assert ctx.progress_value == 1.0
    assert ctx.progress_message == "m" * (MAX_PROGRESS_MESSAGE - 1) + "…"
    assert ctx.take_report() == (1.0, ctx.progress_message, None)


def test_a_report_the_worker_could_not_store_is_sent_again() -> None:
    ctx = _ctx()
    ctx.progress(0.5, "half")
    ctx.checkpoint([1])
    taken = ctx.take_report()
    assert not ctx.has_unsent_report
    ctx.progress(0.6)  # reported while the write was on its way
    ctx.return_report(taken[0], taken[2])
    assert ctx.take_report() == (0.6, None, "[1]")


def test_reporting_after_a_cancel_raises_once_the_report_is_kept() -> None:
    ctx = _ctx()
    ctx.cancelled.set()
    with pytest.raises(RunCancelled):
        ctx.checkpoint({"at": 3})
    assert ctx.take_report() == (None, None, '{"at":3}')
