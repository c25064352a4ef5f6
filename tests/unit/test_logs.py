"""The log formatters: JSON fields, run ids from the context, redaction everywhere, one
text line per record; and the attempt-end line's level and fields."""

from __future__ import annotations

import io
import json
import logging
import random
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwheel.core.model import (
    AttemptOutcome,
    Backoff,
    ClaimedRun,
    Delivery,
    Priority,
    RetryPolicy,
    Run,
    RunState,
)
from cronwheel.observability.attempt_log import ATTEMPTS_LOGGER, level_of, log_attempt_end
from cronwheel.observability.logs import (
    JsonFormatter,
    TextFormatter,
    configure,
    current_run,
    formatter,
    level_number,
)
from cronwheel.security.redact import register_secret
from cronwheel.store.base import Completion

SECRET = "sekrit-" + uuid.uuid4().hex
register_secret(SECRET)

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _run(**changes: Any) -> Run:
    values: dict[str, Any] = {
        "id": 42,
        "tenant_id": "acme",
        "job_id": "job-1",
        "scheduled_for": T0,
        "available_at": T0,
        "state": RunState.RUNNING,
        "pool": "reports",
        "priority": Priority.NORMAL,
        "attempt": 2,
        "max_attempts": 3,
        "fence": 7,
        "job_version": 1,
        "created_at": T0,
    }
    values.update(changes)
    return Run(**values)


def _claimed(run: Run) -> ClaimedRun:
    return ClaimedRun(
        run=run,
        job_name="nightly",
        action={"type": "handler", "name": "x"},
        payload=None,
        retry=RetryPolicy(max_attempts=3, backoff=Backoff.FIXED, initial_delay=1.0),
        timeout_seconds=60.0,
        delivery=Delivery.AT_LEAST_ONCE,
    )


def _record(
    msg: str, *args: Any, name: str = "cronwheel.worker", **extra: Any
) -> logging.LogRecord:
    record = logging.LogRecord(name, logging.INFO, __file__, 1, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_a_json_line_has_ts_level_logger_and_message() -> None:
    record = _record("hello %s", "world")
    record.created = T0.timestamp() + 0.25
    line = json.loads(JsonFormatter().format(record))
    assert line == {
        "ts": "2026-03-01T09:00:00.250Z",
        "level": "info",
        "logger": "cronwheel.worker",
        "message": "hello world",
    }


def test_a_json_line_carries_the_current_runs_ids_and_the_extras() -> None:
    token = current_run.set(_run())
    try:
        line = json.loads(JsonFormatter().format(_record("x", outcome="failed", when=T0)))
    finally:
        current_run.reset(token)
    assert {k: line[k] for k in ("run_id", "job_id", "tenant", "attempt", "fence", "pool")} == {
        "run_id": 42,
        "job_id": "job-1",
        "tenant": "acme",
        "attempt": 2,
        "fence": 7,
        "pool": "reports",
    }
    assert line["outcome"] == "failed"
    assert line["when"] == "2026-03-01T09:00:00Z"
    assert "run_id" not in json.loads(JsonFormatter().format(_record("no run now")))


def test_json_redacts_the_message_the_extras_and_the_exception() -> None:
    try:
        raise RuntimeError(f"connect to postgresql://u:{SECRET}@db/x failed")
    except RuntimeError:
        record = _record(
            "token %s",
            SECRET,
            headers={"Authorization": f"Bearer {SECRET}"},
            values=[SECRET],
            url="https://u:hunter22@example.com/",
        )
        record.exc_info = sys.exc_info()
    text = JsonFormatter().format(record)
    assert SECRET not in text and "hunter22" not in text
    line = json.loads(text)
    assert line["message"] == "token ***"
    assert line["headers"] == {"Authorization": "Bearer ***"}
    assert line["values"] == ["***"]
    assert "RuntimeError: connect to postgresql://u:***@db/x failed" in line["exception"]


def test_uvicorn_access_lines_get_their_fields() -> None:
    record = _record(
        '%s - "%s %s HTTP/%s" %d',
        "127.0.0.1:5000",
        "GET",
        "/v1/jobs?x=1",
        "1.1",
        200,
        name="uvicorn.access",
        color_message="\x1b[1mcoloured\x1b[0m",
    )
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == '127.0.0.1:5000 - "GET /v1/jobs?x=1 HTTP/1.1" 200'
    assert (line["method"], line["path"], line["status"]) == ("GET", "/v1/jobs?x=1", 200)
    assert "color_message" not in line


def test_text_is_one_line_per_record_even_with_a_traceback() -> None:
    try:
        raise ValueError(f"two\nlines {SECRET}")
    except ValueError:
        record = _record("first\nsecond")
        record.exc_info = sys.exc_info()
    text = TextFormatter().format(record)
    assert "\n" not in text
    assert SECRET not in text
    assert " INFO cronwheel.worker: first\\nsecond | Traceback" in text
    assert text.endswith("ValueError: two\\nlines ***")


def test_text_escapes_control_and_bidi_characters_in_every_value() -> None:
    """A name stored before names were checked, a target's error text: nothing in a
    text line starts a new line, moves the cursor or reorders what a person reads."""
    record = _record("job %s failed: %s", "evil\r\n2026 ERROR forged\x1b[2J", "\u202eexe.txt")
    text = TextFormatter().format(record)
    assert text.endswith(
        r" INFO cronwheel.worker: job evil\r\n2026 ERROR forged\x1b[2J failed: \u202eexe.txt"
    )
    assert not [c for c in text if c in "\r\n\x1b\u202e"]


def test_levels_and_formats_are_checked() -> None:
    assert level_number("warning") == logging.WARNING
    with pytest.raises(ValueError, match="log level"):
        level_number("loud")
    with pytest.raises(ValueError, match="log format"):
        formatter("xml")


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """configure() on a string stream; the root logger as it was afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, sys.excepthook)
    stream = io.StringIO()
    configure("json", "info")
    root.handlers[0].setStream(stream)  # type: ignore[attr-defined]
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        sys.excepthook = saved[2]
        for name in ("cronwheel", "uvicorn", "httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.NOTSET)


def _completion(run: Run, **changes: Any) -> Completion:
    values: dict[str, Any] = {
        "run_id": run.id,
        "fence": run.fence,
        "worker_id": "w1",
        "state": RunState.SUCCEEDED,
        "outcome": AttemptOutcome.SUCCEEDED,
        "started_at": T0 + timedelta(seconds=0.002),
        "finished_at": T0 + timedelta(seconds=1.5),
        "lag_seconds": 0.002,
    }
    values.update(changes)
    return Completion(**values)


def test_the_attempt_end_line(captured: io.StringIO) -> None:
    run = _run()
    log_attempt_end(_claimed(run), _completion(run))
    line = json.loads(captured.getvalue())
    assert line["logger"] == ATTEMPTS_LOGGER and line["level"] == "info"
    assert line["message"] == (
        "run 42 of job nightly (job-1) attempt 2/3 succeeded in 1.498 s, start lag 0.002 s"
    )
    assert (line["outcome"], line["duration_seconds"], line["lag_seconds"]) == (
        "succeeded",
        1.498,
        0.002,
    )


def test_a_failure_line_carries_the_error_and_the_traceback(captured: io.StringIO) -> None:
    run = _run()
    retry_at = T0 + timedelta(seconds=5)
    failed = _completion(
        run,
        state=RunState.PENDING,
        outcome=AttemptOutcome.FAILED,
        error_class="KeyError",
        error_message="'missing'",
        available_at=retry_at,
    )
    try:
        {}["missing"]
    except KeyError as exc:
        error = exc
    log_attempt_end(_claimed(run), failed, error)
    line = json.loads(captured.getvalue())
    assert line["level"] == "warning"
    assert (line["error_class"], line["error"]) == ("KeyError", "'missing'")
    assert line["retry_at"] == "2026-03-01T09:00:05Z"
    assert "Traceback" in line["exception"] and "KeyError" in line["exception"]


def test_levels_of_attempt_ends() -> None:
    run = _run()
    assert level_of(_completion(run)) == logging.INFO
    cancelled = _completion(run, state=RunState.CANCELLED, outcome=AttemptOutcome.CANCELLED)
    assert level_of(cancelled) == logging.INFO
    retried = _completion(run, state=RunState.PENDING, outcome=AttemptOutcome.TIMED_OUT)
    assert level_of(retried) == logging.WARNING
    dead = _completion(run, state=RunState.DEAD, outcome=AttemptOutcome.PERMANENT)
    assert level_of(dead) == logging.ERROR


def test_nothing_is_built_when_info_is_filtered_out(captured: io.StringIO) -> None:
    logging.getLogger("cronwheel").setLevel(logging.WARNING)
    run = _run()
    # A success below the level returns before reading the claimed run at all.
    log_attempt_end(None, _completion(run))  # type: ignore[arg-type]
    assert captured.getvalue() == ""


def test_a_timeout_gets_no_traceback(captured: io.StringIO) -> None:
    run = _run()
    timed_out = _completion(
        run,
        state=RunState.PENDING,
        outcome=AttemptOutcome.TIMED_OUT,
        error_class="Timeout",
        error_message="the run did not finish within its timeout of 1.0 s",
        available_at=T0 + timedelta(seconds=5),
    )
    try:
        raise InterruptedError("stopped by the watchdog")
    except InterruptedError as exc:
        error = exc
    log_attempt_end(_claimed(run), timed_out, error)
    line = json.loads(captured.getvalue())
    assert line["outcome"] == "timed_out" and "exception" not in line
    assert line["error_class"] == "Timeout"


def test_a_crash_is_a_json_line_too(captured: io.StringIO) -> None:
    try:
        raise RuntimeError(f"bug near {SECRET}")
    except RuntimeError as exc:
        sys.excepthook(RuntimeError, exc, exc.__traceback__)
    line = json.loads(captured.getvalue())
    assert line["level"] == "critical" and line["message"] == "crashed: bug near ***"
    assert "RuntimeError: bug near ***" in line["exception"] and SECRET not in line["exception"]


def test_the_level_applies_to_every_logger_but_httpx_below_debug(
    captured: io.StringIO,
) -> None:
    for name in ("myapp.jobs", "cronwheel.worker", "uvicorn.access"):
        assert logging.getLogger(name).isEnabledFor(logging.INFO), name
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
    configure("json", "debug")
    assert logging.getLogger("httpx").isEnabledFor(logging.DEBUG)


def test_an_attempt_line_does_not_walk_the_stack_for_its_caller(
    captured: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28 item 3: at info, a worker writes a line per attempt, and logging's
    lookup of the calling file and line was a sixth of a line's cost; the caller is
    always log_attempt_end, so the record names it without the lookup."""

    def walked(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("findCaller was called")

    monkeypatch.setattr(logging.Logger, "findCaller", walked)
    run = _run()
    log_attempt_end(_claimed(run), _completion(run))
    line = json.loads(captured.getvalue())
    assert line["message"].startswith("run 42 of job nightly")


def test_a_line_is_stamped_as_datetime_formats_its_time_to_the_millisecond() -> None:
    """The stamp's date and time are formatted once a second (a worker writes thousands
    of lines a second); each line reads as datetime's isoformat would write it."""
    rng = random.Random(51)
    moments = [0.0, 1.9994999, 1.9999996, T0.timestamp() - 0.0005, T0.timestamp() + 0.999]
    moments += [round(rng.uniform(1.7e9, 1.8e9), rng.choice([3, 4, 6, 9])) for _ in range(3000)]
    for created in sorted(moments) + moments:  # in order (the cache hits) and not
        record = _record("x")
        record.created = created
        expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
        assert TextFormatter().format(record).split()[0] == expected.replace("+00:00", "Z")
