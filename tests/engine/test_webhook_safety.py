"""Webhooks of hostile tenants (docs/security.md): internal targets refused after DNS
resolution, nothing of a network failure but its class in the run's history, cronwheel's
headers not shadowed, signatures per tenant, answers read no further than a small cap."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pytest

from cronwheel.actions import verify
from cronwheel.actions.webhook import MAX_ERROR_BODY, MAX_RESPONSE_READ
from cronwheel.core.model import AttemptOutcome, RetryPolicy, RunState
from cronwheel.engine.worker import Worker
from cronwheel.security.egress import REFUSED
from cronwheel.security.signing import tenant_key
from cronwheel.store.base import Store
from tests.engine.helpers import job_with_run, one_run
from tests.engine.test_worker import FAST
from tests.engine.webhook_target import webhook_target

SECRET = b"the operator's secret"
STRICT = replace(FAST, webhook_allow=())
"""The cluster default: no internal target allowed."""
ONCE = RetryPolicy(max_attempts=3, initial_delay=0.05, max_delay=0.05)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",  # a name: refused after resolution, not by its spelling
        "2130706433",
        "0x7f000001",
        "[::ffff:127.0.0.1]",
        # Spellings the API refuses since issue 29 (a job stored before): refused at
        # delivery too.
        "[::127.0.0.1]",
        "%31%32%37.0.0.1",
        "127。0。0。1",
        "\uff11\uff12\uff17.0.0.1",
    ],
)
async def test_a_loopback_target_is_refused_at_connection_and_not_retried(
    store: Store, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRONWHEEL_WEBHOOK_ALLOW", raising=False)
    with webhook_target() as target:
        port = target.url.rsplit(":", 1)[1]
        action = {"type": "webhook", "url": f"http://{host}:{port}/admin"}
        job, _ = await job_with_run(store, action=action, retry=ONCE)
        assert await Worker(store, STRICT, webhook_secret=SECRET).run_once() == 1
        assert target.received == []  # never reached
    run = await one_run(store, job.id)
    assert run.state is RunState.DEAD  # permanent: it would be refused again
    [attempt] = await store.list_attempts(run.tenant_id, run.id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.PERMANENT, "EgressRefused")
    assert attempt.error_message == f"POST http://{host}:{port}/admin: {REFUSED}"


async def test_a_name_allowed_by_the_operator_is_reached(store: Store) -> None:
    with webhook_target() as target:
        port = target.url.rsplit(":", 1)[1]
        job, _ = await job_with_run(
            store, action={"type": "webhook", "url": f"http://localhost:{port}/ok"}
        )
        worker = Worker(store, replace(FAST, webhook_allow=("localhost",)), webhook_secret=SECRET)
        assert await worker.run_once() == 1
        assert len(target.received) == 1
    assert (await one_run(store, job.id)).state is RunState.SUCCEEDED


async def test_a_connection_error_says_refused_and_no_more(store: Store) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    action = {"type": "webhook", "url": f"http://127.0.0.1:{port}/x"}
    job, _ = await job_with_run(store, action=action, retry=RetryPolicy(max_attempts=1))
    await Worker(store, FAST, webhook_secret=SECRET).run_once()
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts(run.tenant_id, run.id)
    assert attempt.outcome is AttemptOutcome.FAILED
    assert attempt.error_message == f"POST http://127.0.0.1:{port}/x: connection refused"


async def test_each_tenants_webhooks_are_signed_with_its_own_key(store: Store) -> None:
    now = await store.now()
    await store.ensure_tenant("acme", "Acme", now=now)
    await store.ensure_tenant("bobco", "Bobco", now=now)
    with webhook_target() as target:
        for tenant in ("acme", "bobco"):
            await job_with_run(
                store, action={"type": "webhook", "url": f"{target.url}/{tenant}"}, tenant_id=tenant
            )
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == 2
        got = {r.path[1:]: r for r in target.received}
    key_a, key_b = tenant_key(SECRET, "acme"), tenant_key(SECRET, "bobco")
    a, b = got["acme"], got["bobco"]
    assert a.headers["Cronwheel-Tenant-Id"] == "acme"
    assert verify(key_a, a.headers, a.body) and verify(key_b, b.headers, b.body)
    assert not verify(key_a, b.headers, b.body)  # B's request is not A's
    forged = {
        **b.headers,
        "Cronwheel-Tenant-Id": "acme",
        "Cronwheel-Job-Id": a.headers["Cronwheel-Job-Id"],
    }
    assert not verify(key_a, forged, b.body)


async def test_a_stored_jobs_reserved_headers_are_not_sent(store: Store) -> None:
    """Refused at creation since; a job stored before that cannot shadow them either."""
    with webhook_target() as target:
        headers = {
            "cronwheel-tenant-id": "someone-else",
            "IDEMPOTENCY-KEY": "mine",
            "Host": "internal.example",
            "X-Team": "ops",
            # Beside the real ones for a receiver that reads _ as - (issue 29, item 10).
            "Cronwheel_Tenant_Id": "acme",
            "cronwheel_signature": "t=1,v2=00",
            "Idempotency_Key": "mine",
        }
        job, _ = await job_with_run(
            store, action={"type": "webhook", "url": f"{target.url}/h", "headers": headers}
        )
        await Worker(store, FAST, webhook_secret=SECRET).run_once()
        [request] = target.received
    lowered = {k.lower(): v for k, v in request.headers.items()}
    assert lowered["cronwheel-tenant-id"] == "default"
    assert lowered["idempotency-key"].startswith(job.id)
    assert lowered["host"] == target.url.removeprefix("http://")
    assert lowered["x-team"] == "ops"
    assert not [k for k in lowered if k.replace("_", "-") != k and "cronwheel" in k]
    assert "idempotency_key" not in lowered
    assert verify(tenant_key(SECRET, "default"), request.headers, request.body)


@dataclass
class Firehose:
    url: str
    sent: int = 0
    """Bytes of body the server managed to send before the client stopped reading."""
    done: threading.Event = field(default_factory=threading.Event)


@contextmanager
def firehose(status: int, chunk: bytes = b"x" * 65536, pause: float = 0.0) -> Iterator[Firehose]:
    """A target answering ``status`` with an endless body (until the client hangs up)."""
    server = socket.create_server(("127.0.0.1", 0))
    hose = Firehose(f"http://127.0.0.1:{server.getsockname()[1]}")

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            head = f"HTTP/1.1 {status} Whatever\r\nContent-Type: text/plain\r\n\r\n"
            try:
                conn.sendall(head.encode())
                while not hose.done.is_set():
                    conn.sendall(chunk)
                    hose.sent += len(chunk)
                    if pause:
                        time.sleep(pause)
            except OSError:
                pass
        hose.done.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield hose
    finally:
        hose.done.set()
        server.close()
        thread.join(5)


@pytest.mark.parametrize("status", [200, 500])
async def test_an_endless_answer_is_not_read_past_a_small_cap(store: Store, status: int) -> None:
    with firehose(status) as hose:
        job, _ = await job_with_run(
            store, action={"type": "webhook", "url": f"{hose.url}/big"}, retry=RetryPolicy(1)
        )
        started = time.monotonic()
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == 1
        assert time.monotonic() - started < 10
        # The worker hung up: the server's writes fail once the socket buffers are full
        # (a few MB on loopback), instead of streaming 100 MB into the worker.
        assert await asyncio.to_thread(hose.done.wait, 10)
        assert hose.sent < 32 * 1024 * 1024
    run = await one_run(store, job.id)
    if status == 200:
        assert run.state is RunState.SUCCEEDED
    else:
        assert run.last_error is not None and "answered 500: xxx" in run.last_error
        assert run.last_error.count("x") <= MAX_ERROR_BODY + 10 < MAX_RESPONSE_READ


async def test_a_target_that_trickles_forever_is_cut_by_the_timeout(store: Store) -> None:
    with firehose(500, chunk=b"x", pause=0.05) as hose:
        job, _ = await job_with_run(
            store,
            action={"type": "webhook", "url": f"{hose.url}/slow"},
            retry=RetryPolicy(1),
            timeout_seconds=1.0,
        )
        started = time.monotonic()
        assert await Worker(store, FAST, webhook_secret=SECRET).run_once() == 1
        assert time.monotonic() - started < 10
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts(run.tenant_id, run.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT


async def test_a_redirect_is_not_followed(store: Store) -> None:
    with webhook_target() as inner, webhook_target() as outer:
        outer.answers["/go"] = [(302, {"Location": f"{inner.url}/admin"})]
        port = outer.url.rsplit(":", 1)[1]
        job, _ = await job_with_run(
            store, action={"type": "webhook", "url": f"http://localhost:{port}/go"}, retry=ONCE
        )
        # Only the first hop is allowed; the redirect would go to 127.0.0.1.
        worker = Worker(store, replace(FAST, webhook_allow=("localhost",)), webhook_secret=SECRET)
        assert await worker.run_once() == 1
        assert len(outer.received) == 1 and inner.received == []
    run = await one_run(store, job.id)
    [attempt] = await store.list_attempts(run.tenant_id, run.id)
    assert (attempt.outcome, attempt.error_class) == (AttemptOutcome.PERMANENT, "HTTP302")


def test_a_bad_allow_list_entry_is_refused_by_the_worker_config() -> None:
    with pytest.raises(ValueError, match="webhook_allow: 'not a host'"):
        replace(FAST, webhook_allow=("not a host",))
