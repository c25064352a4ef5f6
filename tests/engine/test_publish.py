"""Publish runs against the machine's real brokers (issue 30 item 2): NATS JetStream,
RabbitMQ and Redis Streams. A real consumer checks each message's headers and
signature; a broker taken down (through a proxy) and brought back gets the message once
it returns, and a repeat only ever carries the same idempotency key."""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronwheel.actions import verify
from cronwheel.actions.context import RunContext
from cronwheel.actions.publish import PublishAction
from cronwheel.core.lifecycle import OutcomeKind
from cronwheel.core.model import RetryPolicy, RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.signing import tenant_key
from cronwheel.store.base import Store
from tests.engine.brokers import KINDS, URLS, TcpProxy, destination, via
from tests.engine.helpers import eventually, job_with_run, one_run, running
from tests.engine.test_worker import FAST

SECRET = b"publish-secret"
KEY = tenant_key(SECRET, "default")
RETRY = RetryPolicy(max_attempts=20, initial_delay=0.1, max_delay=0.3)


def worker(store: Store, **brokers: str) -> Worker:
    return Worker(store, dataclasses.replace(FAST, brokers=brokers), webhook_secret=SECRET)


def publish(to: str, broker: str = "events", **extra: Any) -> dict[str, Any]:
    return {"type": "publish", "broker": broker, "to": to, **extra}


async def _state(store: Store, job_id: str, state: RunState) -> bool:
    return (await one_run(store, job_id)).state is state


@pytest.mark.parametrize("kind", KINDS)
async def test_a_run_is_published_confirmed_and_carries_its_signed_identity(
    store: Store, kind: str
) -> None:
    async with destination(kind) as dest:
        job, new_run = await job_with_run(
            store, action=publish(dest.to), payload={"order": 42}, retry=RETRY
        )
        async with running(worker(store, events=URLS[kind])):
            await eventually(lambda: _state(store, job.id, RunState.SUCCEEDED))
        [message] = await dest.received()
    run = await one_run(store, job.id)
    headers = message.headers
    assert headers["Idempotency-Key"] == f"{job.id}:{new_run.scheduled_for.isoformat()}"
    assert (headers["Cronwheel-Run-Id"], headers["Cronwheel-Attempt"]) == (str(run.id), "1")
    assert (headers["Cronwheel-Fence"], headers["Cronwheel-Job-Id"]) == (str(run.fence), job.id)
    assert headers["Content-Type"] == "application/json"
    assert verify(KEY, headers, message.body)
    assert not verify(KEY, headers, message.body + b"tampered")
    assert not verify(KEY, {**headers, "Cronwheel-Fence": "99"}, message.body)
    envelope = json.loads(message.body)
    assert (envelope["run_id"], envelope["payload"]) == (run.id, {"order": 42})
    if kind == "nats":
        assert headers["Nats-Msg-Id"] == headers["Idempotency-Key"]
    if kind == "rabbitmq":
        assert headers["message_id"] == headers["Idempotency-Key"]
    assert isinstance(run.result, dict) and run.result["broker"] == "events"


@pytest.mark.parametrize("kind", KINDS)
async def test_a_broker_down_then_back_gets_the_message_once_it_returns(
    store: Store, kind: str
) -> None:
    proxy = TcpProxy(URLS[kind])
    await proxy.start()
    async with destination(kind) as dest:
        w = worker(store, events=via(URLS[kind], proxy.port))
        async with running(w):
            before, _ = await job_with_run(
                store, action=publish(dest.to, body="before"), retry=RETRY, timeout_seconds=2
            )
            await eventually(lambda: _state(store, before.id, RunState.SUCCEEDED))
            await proxy.stop()  # the connection the worker holds is cut too
            job, _ = await job_with_run(
                store, action=publish(dest.to, body="during"), retry=RETRY, timeout_seconds=2
            )

            async def failed_once() -> bool:
                attempts = await store.list_attempts("default", (await one_run(store, job.id)).id)
                return any(a.outcome.value != "succeeded" for a in attempts)

            await eventually(failed_once)
            await proxy.start()
            await eventually(lambda: _state(store, job.id, RunState.SUCCEEDED))
        received = await dest.received()
    await proxy.stop()
    run = await one_run(store, job.id)
    attempts = await store.list_attempts("default", run.id)
    assert run.attempt >= 2 and attempts[0].error_class in ("BrokerUnavailable", "Timeout")
    assert "cannot reach" in (attempts[0].error_message or "") or attempts[0].error_class in (
        "Timeout",
        None,
    )
    bodies = [m.body for m in received]
    assert bodies.count(b"before") == 1
    during = [m for m in received if m.body == b"during"]
    assert during, "the message published while the broker was down never arrived"
    # A repeat (an attempt whose confirmation was lost) carries the same key; NATS and
    # Redis drop it themselves.
    assert {m.headers["Idempotency-Key"] for m in during} == {
        f"{job.id}:{run.scheduled_for.isoformat()}"
    }
    if kind in ("nats", "redis"):
        assert len(during) == 1


def _ctx(job_id: str = "job-1", attempt: int = 1) -> RunContext:
    return RunContext(
        run_id=7,
        job_id=job_id,
        job_name="n",
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=attempt,
        fence=attempt,
        payload=None,
        checkpoint_state=None,
        tenant_id="default",
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_a_second_attempt_of_the_same_run_is_a_duplicate_only_by_its_key(kind: str) -> None:
    """NATS (Nats-Msg-Id) and Redis (cronwheel's marker) keep one message; RabbitMQ has
    no de-duplication: two, both with the run's key as message_id for the consumer."""
    async with destination(kind) as dest:
        action = PublishAction({"events": URLS[kind]}, SECRET)
        try:
            first = await action.execute(publish(dest.to), _ctx(attempt=1), 5)
            again = await action.execute(publish(dest.to), _ctx(attempt=2), 5)
            other = await action.execute(publish(dest.to), _ctx("job-2"), 5)
        finally:
            await action.close()
        received = await dest.received()
    assert [o.kind for o in (first, again, other)] == [OutcomeKind.SUCCEEDED] * 3
    keys = [m.headers["Idempotency-Key"] for m in received]
    if kind == "rabbitmq":
        assert sorted(keys) == sorted(
            [_ctx().idempotency_key] * 2 + [_ctx("job-2").idempotency_key]
        )
    else:
        assert sorted(keys) == sorted([_ctx().idempotency_key, _ctx("job-2").idempotency_key])
        assert json.loads(again.result or "{}")["duplicate"] is True


@pytest.mark.parametrize(
    ("kind", "to", "error_class"),
    [
        ("nats", "cwtest-nostream.x", "NoStream"),
        ("rabbitmq", "/cwtest-no-such-queue", "Unroutable"),
    ],
)
async def test_a_message_no_stream_or_queue_takes_is_a_retryable_failure(
    kind: str, to: str, error_class: str
) -> None:
    async with destination(kind):  # the broker is there, just not this destination
        action = PublishAction({"events": URLS[kind]}, SECRET)
        try:
            outcome = await action.execute(publish(to), _ctx(), 5)
        finally:
            await action.close()
    assert (outcome.kind, outcome.error_class) == (OutcomeKind.FAILED, error_class)


async def test_an_unknown_broker_fails_and_a_bad_target_fails_for_good() -> None:
    action = PublishAction({"events": URLS["rabbitmq"]}, SECRET)
    unknown = await action.execute(publish("x", broker="nope"), _ctx(), 5)
    assert (unknown.kind, unknown.error_class) == (OutcomeKind.FAILED, "UnknownBroker")
    assert "--broker nope=URL" in (unknown.error_message or "")
    bad = await action.execute(publish("no-exchange-slash"), _ctx(), 5)
    assert (bad.kind, bad.error_class) == (OutcomeKind.PERMANENT, "InvalidTarget")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_broker_password_is_never_in_the_outcome_the_registry_or_the_log(
    store: Store, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    password = "hunter2-publish-pw"
    url = {
        "nats": f"nats://user:{password}@127.0.0.1:9",
        "rabbitmq": f"amqp://guest:{password}@127.0.0.1:9/",
        "redis": f"redis://:{password}@127.0.0.1:9/0",
    }[kind]
    caplog.set_level(logging.DEBUG)
    job, _ = await job_with_run(
        store,
        action=publish("cwtest.x" if kind != "rabbitmq" else "/q"),
        retry=RetryPolicy(max_attempts=1),
        timeout_seconds=3,
    )
    w = worker(store, events=url)
    async with running(w):
        await eventually(lambda: _state(store, job.id, RunState.DEAD))
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts("default", run.id)
    assert attempt.error_class == "BrokerUnavailable", attempt
    live = await store.list_live_workers(seen_since=datetime.now(UTC) - timedelta(minutes=1))
    assert [dict(x.brokers) for x in live if x.id == w.id] in ([], [{"events": kind}])
    shown = [attempt.error_message or "", run.last_error or "", caplog.text, repr(live)]
    assert not any(password in text for text in shown)


async def test_a_worker_announces_its_brokers_names_and_kinds_never_their_urls(
    store: Store,
) -> None:
    password = "announce-pw-123"
    w = worker(
        store,
        events=f"nats://u:{password}@127.0.0.1:4222",
        jobs=f"amqp://guest:{password}@127.0.0.1:5672/",
    )

    async def announced() -> list[Any]:
        live = await store.list_live_workers(seen_since=datetime.now(UTC) - timedelta(minutes=1))
        return [x for x in live if x.id == w.id]

    async with running(w):
        [me] = await eventually(announced)
    assert dict(me.brokers) == {"events": "nats", "jobs": "rabbitmq"}
    assert password not in repr(me)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_pipeline_task_publishes_its_inputs_to_the_broker_its_worker_names(
    store: Store, kind: str
) -> None:
    """A publish task: checked against the live worker's brokers when the pipeline is
    defined, then published by that worker, its envelope carrying the task's inputs."""
    from cronwheel.control.pipelines import PipelineService
    from cronwheel.errors import InvalidInput

    service = PipelineService(store)
    w = worker(store, events=URLS[kind])
    w.handler("count")(lambda ctx: 7)

    async def announced() -> bool:
        live = await store.list_live_workers(seen_since=datetime.now(UTC) - timedelta(minutes=1))
        return any(x.id == w.id for x in live)

    async with destination(kind) as dest:
        definition: dict[str, Any] = {
            "tasks": {
                "count": {"action": {"type": "handler", "name": "count"}},
                "announce": {
                    "action": publish(dest.to, broker="audit"),
                    "retry": {"max_attempts": 5},
                },
            },
            "edges": [{"from": "count", "to": "announce"}],
        }
        async with running(w):
            await eventually(announced)
            with pytest.raises(InvalidInput) as refused:
                await service.create(f"publishes-{kind}", definition)
            assert refused.value.field == "tasks.announce.action.broker"
            assert "--broker audit=URL" in refused.value.reason
            definition["tasks"]["announce"]["action"] = publish(dest.to)
            pipeline = await service.create(f"publishes-{kind}", definition)
            started = await service.start(pipeline.id)

            async def finished() -> Any:
                found = await service.get_run(started.id)
                return found if found.state != "running" else None

            done = await eventually(finished)
        [message] = await dest.received()
    assert done.state == "succeeded", done
    [task] = [t for t in done.tasks if t.task == "announce"]
    envelope = json.loads(message.body)
    assert (envelope["task"], envelope["inputs"]) == ("announce", {"count": 7})
    assert envelope["pipeline_run_id"] == started.id
    assert message.headers["Cronwheel-Run-Id"] == str(task.run_id)
    assert verify(KEY, message.headers, message.body)
    run = await store.get_run("default", task.run_id or 0)
    assert run is not None and isinstance(run.result, dict) and run.result["broker"] == "events"
