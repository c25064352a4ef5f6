"""Webhook runs against a real local HTTP server: headers, signature, status mapping."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import random

from cronwheel.actions import verify
from cronwheel.core.model import REASON_PERMANENT, AttemptOutcome, RetryPolicy, RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.signing import tenant_key
from cronwheel.store.base import Store
from tests.engine.helpers import eventually, job_with_run, one_run, run_states, running
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import webhook_target

SECRET = b"s3cret"
KEY = tenant_key(SECRET, "default")
"""What the default tenant's receivers verify with."""


async def test_the_target_gets_the_documented_headers_and_a_valid_signature(store: Store) -> None:
    with webhook_target() as target:
        action = {
            "type": "webhook",
            "url": f"{target.url}/hook",
            "method": "PUT",
            "headers": {"X-Team": "ops"},
        }
        job, new_run = await job_with_run(store, action=action, payload={"report": "daily"})
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == 1
        [request] = target.received
    run = await one_run(store, job.id)
    assert run.state is RunState.SUCCEEDED
    assert (request.method, request.path, request.headers["X-Team"]) == ("PUT", "/hook", "ops")
    headers = request.headers
    assert headers["Idempotency-Key"] == f"{job.id}:{new_run.scheduled_for.isoformat()}"
    assert (
        headers["Cronwheel-Run-Id"],
        headers["Cronwheel-Attempt"],
        headers["Cronwheel-Fence"],
    ) == (str(run.id), "1", "1")
    assert (headers["Cronwheel-Job-Id"], headers["Cronwheel-Tenant-Id"]) == (job.id, "default")
    assert verify(KEY, headers, request.body)
    assert verify({"default": KEY}.get, headers, request.body)
    assert not verify(SECRET, headers, request.body)  # the operator's secret is not the key
    assert not verify(b"wrong", headers, request.body)
    assert not verify(KEY, headers, request.body + b"tampered")
    for name in ("Cronwheel-Fence", "Cronwheel-Job-Id", "Cronwheel-Tenant-Id"):
        assert not verify(KEY, {**headers, name: "2"}, request.body), name
    assert b'"report": "daily"' in request.body


async def test_5xx_and_429_are_retried_honouring_retry_after(store: Store) -> None:
    with webhook_target() as target:
        target.answers["/flaky"] = [(503, {}), (429, {"Retry-After": "1"}), (200, {})]
        action = {"type": "webhook", "url": f"{target.url}/flaky"}
        job, _ = await job_with_run(
            store,
            action=action,
            # Retry-After is honoured up to max_delay; the backoff stays under 0.2 s
            retry=RetryPolicy(max_attempts=5, initial_delay=0.05, max_delay=5),
        )
        async with running(Worker(store, FAST, webhook_secret=SECRET)):
            await eventually(lambda: _state(store, job.id, "succeeded"))
        assert len(target.received) == 3
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert [a.error_class for a in attempts] == ["HTTP503", "HTTP429", None]
    assert [a.http_status for a in attempts] == [503, 429, 200]  # kept, success included
    waited = (attempts[2].started_at - attempts[1].finished_at).total_seconds()  # type: ignore[operator]
    assert waited >= 0.99  # Retry-After: 1 beat the 0.05 s backoff


async def test_a_retry_after_that_cannot_be_read_leaves_the_backoff_in_charge(
    store: Store,
) -> None:
    """Issue 29, item 10: ``Retry-After: ²`` (a digit to str.isdigit, not to HTTP) and
    dates no calendar holds were recorded as ValueError / OverflowError."""
    with webhook_target() as target:
        target.answers["/odd"] = [
            (503, {"Retry-After": "\u00b2"}),
            (503, {"Retry-After": "Fri, 31 Dec 99999999999999999999 23:59:59 GMT"}),
            (429, {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}),  # capped by max_delay
            (503, {"Retry-After": "9" * 5000}),
            (200, {}),
        ]
        action = {"type": "webhook", "url": f"{target.url}/odd"}
        job, _ = await job_with_run(
            store,
            action=action,
            retry=RetryPolicy(max_attempts=6, initial_delay=0.05, max_delay=0.2),
        )
        async with running(Worker(store, FAST, webhook_secret=SECRET)):
            await eventually(lambda: _state(store, job.id, "succeeded"))
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert [a.error_class for a in attempts] == ["HTTP503", "HTTP503", "HTTP429", "HTTP503", None]


async def test_other_4xx_are_permanent(store: Store) -> None:
    with webhook_target() as target:
        target.answers["/gone"] = [(410, {})]
        job, _ = await job_with_run(store, action={"type": "webhook", "url": f"{target.url}/gone"})
        await Worker(store, FAST, webhook_secret=SECRET).run_once()
    run = await one_run(store, job.id)
    assert (run.state, run.attempt) == (RunState.DEAD, 1)
    assert "answered 410" in (run.last_error or "")
    assert run.reason == REASON_PERMANENT
    [attempt] = await store.list_attempts(run.tenant_id, run.id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.PERMANENT, "HTTP410")
    assert attempt.http_status == 410


async def test_a_connection_error_is_retryable(store: Store) -> None:
    action = {"type": "webhook", "url": "http://127.0.0.1:9/nothing-listens-here"}
    job, _ = await job_with_run(
        store, action=action, retry=RetryPolicy(max_attempts=2, initial_delay=0.05, max_delay=0.05)
    )
    async with running(Worker(store, FAST, webhook_secret=SECRET)):
        await eventually(lambda: _state(store, job.id, "dead"))
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert [a.outcome for a in attempts] == [AttemptOutcome.FAILED, AttemptOutcome.FAILED]
    assert attempts[0].error_class == "ConnectError"
    assert [a.http_status for a in attempts] == [None, None]  # no answer, no status


async def _state(store: Store, job_id: str, state: str) -> bool:
    return await run_states(store, job_id) == [state]


async def test_cancelling_a_running_webhook_run_aborts_the_request(store: Store) -> None:
    with webhook_target() as target:
        target.delays["/slow"] = 20.0
        job, _ = await job_with_run(store, action={"type": "webhook", "url": f"{target.url}/slow"})
        async with running(Worker(store, FAST, webhook_secret=SECRET)):
            await eventually(lambda: _true(len(target.received) == 1))
            run = await one_run(store, job.id)
            await store.cancel_run("default", run.id, now=await store.now(), actor="ops")
            await eventually(lambda: _state(store, job.id, "cancelled"), timeout=10)
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.outcome is AttemptOutcome.CANCELLED
    assert attempt.finished_at is not None and attempt.started_at is not None
    assert (
        attempt.finished_at - attempt.started_at
    ).total_seconds() < 10  # did not wait for the answer


async def _true(value: bool) -> bool:
    return value


def _named(headers: dict[str, str], name: str) -> list[str]:
    """Every value sent under ``name``, whatever its case."""
    return [value for key, value in headers.items() if key.lower() == name.lower()]


async def test_webhooks_say_who_sends_them_and_what_their_body_is(store: Store) -> None:
    agent = f"cronwheel/{importlib.metadata.version('cronwheel')}"
    with webhook_target() as target:
        cases = [
            ({}, "application/json"),  # the JSON envelope
            ({"body": "plain words"}, "text/plain; charset=utf-8"),
            ({"body": {"a": 1}}, "application/json"),
            ({"body": ["x"]}, "application/json"),
        ]
        for i, (extra, _) in enumerate(cases):
            action = {"type": "webhook", "url": f"{target.url}/{i}", **extra}
            await job_with_run(store, action=action)
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == len(cases)
        received = {int(r.path[1:]): r for r in target.received}
    for i, (_, expected) in enumerate(cases):
        headers = received[i].headers
        assert _named(headers, "Content-Type") == [expected], (i, headers)
        assert _named(headers, "User-Agent") == [agent], (i, headers)
    assert received[1].body == b"plain words"
    assert json.loads(received[2].body) == {"a": 1}


async def test_a_jobs_own_content_type_and_user_agent_win(store: Store) -> None:
    with webhook_target() as target:
        action = {
            "type": "webhook",
            "url": f"{target.url}/csv",
            "body": "a,b\n1,2\n",
            "headers": {"content-type": "text/csv", "user-agent": "billing-bot/2"},
        }
        await job_with_run(store, action=action)
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == 1
        [request] = target.received
    assert _named(request.headers, "Content-Type") == ["text/csv"]
    assert _named(request.headers, "User-Agent") == ["billing-bot/2"]
    assert request.body == b"a,b\n1,2\n"
    assert verify(KEY, request.headers, request.body)


async def test_a_huge_retry_after_waits_max_delay_and_jams_nothing(store: Store) -> None:
    # Issue 17, defect 1: Retry-After: 999999999999 overflowed the next-state arithmetic
    # outside the worker's error handling; the run stayed running, its lease renewed.
    with webhook_target() as target:
        target.answers["/jam"] = [(503, {"Retry-After": "999999999999"})] * 2
        action = {"type": "webhook", "url": f"{target.url}/jam"}
        job, _ = await job_with_run(
            store, action=action, retry=RetryPolicy(max_attempts=2, initial_delay=0, max_delay=0.5)
        )
        # A long lease: on a loaded machine a 2 s lease can lapse, and no maintenance
        # runs here to end a lapsed run.
        async with running(Worker(store, STEADY, webhook_secret=SECRET)):
            await eventually(lambda: _state(store, job.id, "dead"))
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert [(a.error_class, a.http_status) for a in attempts] == [("HTTP503", 503)] * 2
    waited = (attempts[1].started_at - attempts[0].finished_at).total_seconds()  # type: ignore[operator]
    assert 0.45 <= waited < 30  # max_delay, not the 31,000 years asked for


STEADY = dataclasses.replace(FAST, lease_seconds=30.0, heartbeat_seconds=1.0)


class _BrokenRandom(random.Random):
    """Fault injection: the backoff's random draw fails, as a defect in computing a
    run's next state would."""

    def uniform(self, a: float, b: float) -> float:
        raise ArithmeticError("injected")


async def test_a_run_whose_next_state_cannot_be_computed_ends_dead_not_held(
    store: Store,
) -> None:
    with webhook_target() as target:
        target.answers["/fail"] = [(500, {})]
        target.answers["/ok"] = [(200, {})]
        broken, _ = await job_with_run(
            store, action={"type": "webhook", "url": f"{target.url}/fail"}
        )
        fine, _ = await job_with_run(store, action={"type": "webhook", "url": f"{target.url}/ok"})
        worker = Worker(store, STEADY, webhook_secret=SECRET, rng=_BrokenRandom())
        async with running(worker):
            await eventually(lambda: _state(store, broken.id, "dead"))
            await eventually(lambda: _state(store, fine.id, "succeeded"))

            async def idle() -> bool:
                return worker.in_flight == 0

            await eventually(idle)  # nothing held
    run = await one_run(store, broken.id)
    assert run.reason is not None and "could not decide" in run.reason
    [attempt] = await store.list_attempts("default", run.id)
    assert (attempt.outcome.value, attempt.error_class, attempt.http_status) == (
        "failed",
        "HTTP500",
        500,
    )
