"""Completion notifications end to end: a real worker, a real notifier and a real HTTP
target on loopback that is down (503, or refusing connections) and then comes back."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from cronwheel.actions import RunContext, verify
from cronwheel.core.model import RUN_EVENTS, NotificationState, RetryPolicy, RunState
from cronwheel.engine.notifier import Notifier, NotifierConfig
from cronwheel.engine.worker import Worker
from cronwheel.security.egress import LOOPBACK, REFUSED, EgressPolicy
from cronwheel.security.signing import tenant_key
from cronwheel.store.base import Store
from cronwheel.store.conformance.factories import make_run
from tests.engine.helpers import eventually, job_with_run, running
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import Target, webhook_target

SECRET = b"n0tify"
QUICK = NotifierConfig(
    interval_seconds=0.05, initial_delay=0.05, max_delay=0.2, max_tries=10_000, lease_seconds=5
)
EVERY = ["succeeded", "failed", "dead", "skipped"]
RETRY = RetryPolicy(max_attempts=2, initial_delay=0.05, max_delay=0.05)
LOCAL = EgressPolicy.parse(LOOPBACK)  # the targets listen on this machine


@contextlib.asynccontextmanager
async def notifying(notifier: Notifier) -> AsyncIterator[Notifier]:
    stop = asyncio.Event()
    task = asyncio.create_task(notifier.run(stop))
    try:
        yield notifier
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=60)


def _worker(store: Store) -> Worker:
    worker = Worker(store, FAST, webhook_secret=SECRET)

    @worker.handler("ok")
    def ok(ctx: RunContext) -> None:
        pass

    @worker.handler("fails_once")
    def fails_once(ctx: RunContext) -> None:
        if ctx.attempt == 1:
            raise RuntimeError("the first attempt fails")

    @worker.handler("always_fails")
    def always_fails(ctx: RunContext) -> None:
        raise RuntimeError(f"attempt {ctx.attempt} fails too")

    return worker


async def _jobs(store: Store, url: str) -> dict[str, int]:
    """One job per kind of event; returns each job's run id by handler name."""
    notify = ({"on": EVERY, "url": url},)
    runs = {}
    for name in ("ok", "fails_once", "always_fails"):
        job, _ = await job_with_run(
            store, action={"type": "handler", "name": name}, notify=notify, retry=RETRY
        )
        [run] = await store.list_runs("default", job_id=job.id)
        runs[name] = run.id
    skipped_job, _ = await job_with_run(
        store, action={"type": "handler", "name": "ok"}, notify=notify, due_in=3600
    )
    skipped = make_run(skipped_job, datetime.now(UTC), state=RunState.SKIPPED, reason="misfire")
    await store.materialize_runs([skipped], [])
    found = await store.list_runs("default", job_id=skipped_job.id, state=RunState.SKIPPED)
    runs["skipped"] = found[0].id
    return runs


def _expected(runs: dict[str, int]) -> set[str]:
    return {
        f"run-{runs['ok']}-succeeded-1",
        f"run-{runs['fails_once']}-failed-1",
        f"run-{runs['fails_once']}-succeeded-2",
        f"run-{runs['always_fails']}-failed-1",
        f"run-{runs['always_fails']}-dead-2",
        f"run-{runs['skipped']}-skipped-0",
    }


def _received_ids(target: Target) -> list[str]:
    """The event ids of every request the target got, checking each one's signature and
    that its header and body agree."""
    ids = []
    for request in target.received:
        # Signed with the tenant's key, as webhook actions are.
        assert verify(tenant_key(SECRET, "default"), request.headers, request.body)
        assert not verify(tenant_key(SECRET, "other"), request.headers, request.body)
        body = json.loads(request.body)
        assert body["id"] == request.headers["Cronwheel-Event-Id"]
        assert body["type"] == request.headers["Cronwheel-Event"]
        ids.append(body["id"])
    return ids


async def _all_finished(store: Store, runs: dict[str, int]) -> bool:
    for run_id in runs.values():
        run = await store.get_run("default", run_id)
        if run is None or not run.state.finished:
            return False
    return True


async def test_a_target_that_answers_503_gets_every_event_once_back(store: Store) -> None:
    with webhook_target() as target:
        target.answers["/events"] = [(503, {})]  # down: repeats until told otherwise
        runs = await _jobs(store, f"{target.url}/events")
        notifier = Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL)
        hooked: list[str] = []

        @notifier.on()
        async def hook(envelope: dict[str, object]) -> None:
            hooked.append(str(envelope["id"]))

        async with running(_worker(store)), notifying(notifier):
            await eventually(lambda: _all_finished(store, runs))

            async def every_event_tried_twice() -> bool:
                outbox = await store.list_notifications("default")
                return len(outbox) == 6 and all(n.tries >= 2 for n in outbox)

            await eventually(every_event_tried_twice)
            assert hooked == []  # nothing was delivered while the target was down
            target.answers["/events"] = [(200, {})]  # back

            async def all_delivered() -> bool:
                outbox = await store.list_notifications("default")
                return all(n.state is NotificationState.DELIVERED for n in outbox)

            await eventually(all_delivered)
    received = _received_ids(target)
    assert set(received) == _expected(runs)  # every event, each id once after dedup
    assert len(received) > len(set(received))  # the retries sent the same ids again
    assert sorted(set(hooked)) == sorted(_expected(runs))


async def test_a_target_that_refuses_connections_gets_every_event_once_up(store: Store) -> None:
    with socket.socket() as probe:  # a free port nothing listens on yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/events"
    runs = await _jobs(store, url)
    notifier = Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL)
    async with running(_worker(store)), notifying(notifier):
        await eventually(lambda: _all_finished(store, runs))

        async def refused() -> bool:
            outbox = await store.list_notifications("default")
            return len(outbox) == 6 and all(
                n.tries >= 1 and "ConnectError" in (n.last_error or "") for n in outbox
            )

        await eventually(refused)
        with webhook_target(port=port) as target:

            async def all_delivered() -> bool:
                outbox = await store.list_notifications("default")
                return all(n.state is NotificationState.DELIVERED for n in outbox)

            await eventually(all_delivered)
    assert set(_received_ids(target)) == _expected(runs)


async def test_a_notification_that_keeps_failing_is_dead_and_can_be_replayed(
    store: Store,
) -> None:
    with webhook_target() as target:
        target.answers["/events"] = [(500, {})]
        notify = ({"on": ["succeeded"], "url": f"{target.url}/events"},)
        job, _ = await job_with_run(store, action={"type": "handler", "name": "ok"}, notify=notify)
        config = NotifierConfig(interval_seconds=0.05, initial_delay=0.01, max_tries=3)
        notifier = Notifier(store, config=config, secret=SECRET, egress=LOCAL)
        async with running(_worker(store)), notifying(notifier):

            async def dead() -> list[int]:
                found = await store.list_notifications("default", state=NotificationState.DEAD)
                return [n.id for n in found]

            [dead_id] = await eventually(dead)
            assert len(target.received) == 3
            target.answers["/events"] = [(200, {})]
            now = datetime.now(UTC)
            assert await store.replay_notifications("default", [dead_id], now=now) == [dead_id]

            async def delivered() -> bool:
                [n] = await store.list_notifications("default")
                return n.state is NotificationState.DELIVERED

            await eventually(delivered)
        ids = _received_ids(target)
        assert len(ids) == 4 and len(set(ids)) == 1
        assert ids[0].endswith("-succeeded-1")
        del job


async def test_a_workers_hooks_run_in_its_processs_notifier(store: Store) -> None:
    worker = _worker(store)
    dead: list[dict[str, object]] = []
    worker.on_notification("dead")(dead.append)
    with webhook_target() as target:
        runs = await _jobs(store, f"{target.url}/events")
        notifier = Notifier(store, config=QUICK, secret=SECRET, egress=LOCAL, hooks=worker.handlers)
        async with running(worker), notifying(notifier):
            await eventually(lambda: _all_finished(store, runs))
            await eventually(lambda: _delivered(store, 6))
    assert [e["id"] for e in dead] == [f"run-{runs['always_fails']}-dead-2"]
    assert "attempt 2 fails too" in str(dead[0]["error"])
    with pytest.raises(ValueError):
        worker.on_notification("finished")


async def _delivered(store: Store, count: int) -> bool:
    outbox = await store.list_notifications("default", state=NotificationState.DELIVERED)
    return len(outbox) == count


async def test_a_target_the_egress_policy_refuses_is_dead_at_once(store: Store) -> None:
    with webhook_target() as target:
        notify = ({"on": ["succeeded"], "url": f"{target.url}/events"},)
        await job_with_run(store, action={"type": "handler", "name": "ok"}, notify=notify)
        notifier = Notifier(store, config=QUICK, secret=SECRET)  # public addresses only
        async with running(_worker(store)), notifying(notifier):

            async def dead() -> list[object]:
                return await store.list_notifications("default", state=NotificationState.DEAD)

            [n] = await eventually(dead)
        assert target.received == []
    assert n.tries == 1 and REFUSED in (n.last_error or "")  # type: ignore[attr-defined]


def test_the_backoff_doubles_and_is_bounded() -> None:
    notifier = Notifier.__new__(Notifier)
    notifier.config = NotifierConfig(initial_delay=1.0, max_delay=30.0)
    assert [notifier.retry_delay(t) for t in (1, 2, 3, 5, 6, 100_000)] == [1, 2, 4, 16, 30, 30]
    assert {e.value for e in RUN_EVENTS} == set(EVERY)


async def test_a_notifier_beside_a_saturated_worker_pauses_between_full_batches(
    store: Store,
) -> None:
    """The notifier shares its worker's process: while the worker is saturated it sends
    a batch, then pauses, so notifications never take the runs' CPU; they still go out."""
    import time

    with webhook_target() as target:
        target.answers["/events"] = [(200, {})]
        notify = ({"on": ["succeeded"], "url": f"{target.url}/events"},)
        for _ in range(6):
            await job_with_run(store, action={"type": "handler", "name": "ok"}, notify=notify)
        async with running(_worker(store)):

            async def six() -> bool:
                return len(await store.list_notifications("default")) == 6

            await eventually(six)
        config = NotifierConfig(interval_seconds=0.05, batch=2, busy_pause_seconds=0.3)
        notifier = Notifier(store, config=config, secret=SECRET, egress=LOCAL, busy=lambda: True)
        sent: list[float] = []

        @notifier.on()
        def hook(envelope: dict[str, object]) -> None:
            sent.append(time.monotonic())

        async with notifying(notifier):

            async def all_sent() -> bool:
                return len(sent) == 6

            await eventually(all_sent)
    batches = [sent[0], sent[2], sent[4]]
    assert all(later - earlier >= 0.3 for earlier, later in itertools.pairwise(batches))


async def test_a_target_echoing_the_basic_credential_of_its_url_password_gets_it_redacted(
    store: Store,
) -> None:
    """A target that echoes the request's Authorization (Basic, from the URL's password)
    in its error answer: the error kept on the notification holds neither the password
    nor its Basic form (docs/security.md#secrets-at-rest)."""
    import base64

    password = "ntfy-pw-5b7d9f1e3a"
    basic = base64.b64encode(f"hookuser:{password}".encode()).decode()
    with webhook_target() as target:
        target.answers["/events"] = [(500, {})]
        target.echoes["/events"] = ("Authorization",)
        url = target.url.replace("http://", f"http://hookuser:{password}@") + "/events"
        notify = ({"on": ["succeeded"], "url": url},)
        await job_with_run(store, action={"type": "handler", "name": "ok"}, notify=notify)
        config = NotifierConfig(interval_seconds=0.05, initial_delay=0.01, max_tries=1)
        notifier = Notifier(store, config=config, secret=SECRET, egress=LOCAL)
        async with running(_worker(store)), notifying(notifier):

            async def dead() -> list[str]:
                found = await store.list_notifications("default", state=NotificationState.DEAD)
                return [str(n.last_error) for n in found]

            [error] = await eventually(dead)
        [received] = target.received
    assert received.headers["Authorization"] == f"Basic {basic}"  # what was echoed
    assert "answered 500: Authorization=***" in error, error
    assert password not in error and basic not in error and basic.rstrip("=") not in error
