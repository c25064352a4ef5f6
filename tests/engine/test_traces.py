"""Tracing end to end, in process: a job created through the real API with a W3C
traceparent, executed by a real worker on a real store of each backend, yields an
attempt span linked to the request's span; its context reaches webhooks and handlers.
Spans are read from the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import SpanKind, StatusCode

from cronwheel.actions.context import RunContext
from cronwheel.api import AuthConfig, create_app
from cronwheel.control.service import JobService
from cronwheel.engine.worker import Worker, WorkerConfig
from cronwheel.observability import tracing
from cronwheel.sdk import AsyncClient
from cronwheel.security.egress import LOOPBACK, EgressPolicy
from cronwheel.store.base import Store
from tests.api.helpers import ADMIN_TOKEN
from tests.engine.helpers import eventually
from tests.engine.webhook_target import webhook_target

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory, for this test only (the process's global provider is
    never set: other tests run with tracing off)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        yield exporter
    finally:
        tracing.configure(None)
        provider.shutdown()


def api(store: Store) -> httpx.AsyncClient:
    # The webhook targets listen on 127.0.0.1: allowed, as an operator would.
    app = create_app(
        store, auth=AuthConfig(admin_token=ADMIN_TOKEN), egress=EgressPolicy().also(*LOOPBACK)
    )
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://test",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )


async def create(
    store: Store, action: dict[str, Any], traceparent: str | None, name: str = "traced-job"
) -> str:
    """An immediate job, created through the API: its id."""
    spec = {
        "name": name,
        "schedule": {"kind": "immediate"},
        "action": action,
        "retry": {"max_attempts": 1},
    }
    headers = {} if traceparent is None else {"traceparent": traceparent}
    async with api(store) as client:
        answer = await client.post("/v1/jobs", json=spec, headers=headers)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    return job_id


async def execute(store: Store, worker: Worker, job_id: str) -> None:
    """Let the worker run the job's run to its end."""

    async def finished() -> bool:
        await worker.run_once()
        [run] = await store.list_runs("default", job_id=job_id)
        return run.state.finished

    await eventually(finished)


def only(found: list[ReadableSpan], prefix: str) -> ReadableSpan:
    [span] = [s for s in found if s.name.startswith(prefix)]
    return span


def traceparent_of(span: ReadableSpan) -> str:
    context = span.get_span_context()
    assert context is not None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def a_worker(store: Store, handlers: dict[str, Any] | None = None) -> Worker:
    worker = Worker(
        store, WorkerConfig(pools={"default": 2}, webhook_allow=LOOPBACK), webhook_secret=b"s" * 32
    )
    for name, fn in (handlers or {}).items():
        worker.handler(name)(fn)
    return worker


async def test_an_attempt_span_links_to_the_request_that_created_its_job(
    store: Store, spans: InMemorySpanExporter
) -> None:
    seen: list[RunContext] = []

    async def traced(ctx: RunContext) -> None:
        seen.append(ctx)

    job_id = await create(store, {"type": "handler", "name": "traced"}, CALLER)
    await execute(store, a_worker(store, {"traced": traced}), job_id)
    [run] = await store.list_runs("default", job_id=job_id)
    found = list(spans.get_finished_spans())

    # The API's span for the request continues the caller's trace...
    request = only(found, "cronwheel.api create jobs")
    assert request.parent is not None
    assert (request.context.trace_id, request.parent.span_id) == (
        int(CALLER_TRACE, 16),
        int(CALLER_SPAN, 16),
    )
    assert request.kind is SpanKind.SERVER
    # ...and the attempt, a trace of its own, links to it.
    attempt = only(found, "cronwheel.attempt")
    assert attempt.name == "cronwheel.attempt traced"
    assert attempt.parent is None and attempt.kind is SpanKind.CONSUMER
    assert attempt.context.trace_id != request.context.trace_id
    [link] = attempt.links
    assert (link.context.trace_id, link.context.span_id) == (
        request.context.trace_id,
        request.context.span_id,
    )
    attributes = dict(attempt.attributes or {})
    lag = attributes.pop("cronwheel.start_lag_seconds")
    assert isinstance(lag, float) and 0 <= lag < 30
    assert attributes == {
        "cronwheel.run.id": run.id,
        "cronwheel.job.id": job_id,
        "cronwheel.job.name": "traced-job",
        "cronwheel.tenant": "default",
        "cronwheel.pool": "default",
        "cronwheel.attempt": 1,
        "cronwheel.fence": run.fence,
        "cronwheel.scheduled_for": run.scheduled_for.isoformat(),
        "cronwheel.action": "handler",
        "cronwheel.engine.worker.id": attributes["cronwheel.engine.worker.id"],
        "cronwheel.outcome": "succeeded",
    }
    assert attempt.status.status_code is StatusCode.UNSET
    # The handler saw the attempt's context: its own spans continue our trace.
    [ctx] = seen
    assert dict(ctx.trace) == {"traceparent": traceparent_of(attempt)}


async def test_a_webhook_carries_the_attempt_span_and_a_failure_is_an_error(
    store: Store, spans: InMemorySpanExporter
) -> None:
    with webhook_target() as target:
        target.answers["/hook"] = [(500, {})]
        action = {"type": "webhook", "url": f"{target.url}/hook", "headers": {"traceparent": "x"}}
        job_id = await create(store, action, None)
        await execute(store, a_worker(store), job_id)
    attempt = only(list(spans.get_finished_spans()), "cronwheel.attempt")
    assert attempt.name == "cronwheel.attempt webhook"
    [received] = target.received
    sent = {k.lower(): v for k, v in received.headers.items()}
    # Ours replaces the job's own: one traceparent, the attempt's.
    assert sent["traceparent"] == traceparent_of(attempt)
    # The request carried no trace: the API's span starts one, which the attempt links to.
    request = only(list(spans.get_finished_spans()), "cronwheel.api create jobs")
    assert request.parent is None
    [link] = attempt.links
    assert link.context.span_id == request.context.span_id
    assert attempt.attributes is not None
    assert attempt.attributes["cronwheel.outcome"] == "failed"
    assert attempt.attributes["error.type"] == "HTTP500"
    assert attempt.status.status_code is StatusCode.ERROR
    assert "HTTP500" in (attempt.status.description or "")


async def test_a_command_gets_the_attempt_span_in_its_environment(
    store: Store, spans: InMemorySpanExporter
) -> None:
    action = {"type": "command", "argv": ["/bin/sh", "-c", 'echo "$TRACEPARENT"']}
    job_id = await create(store, action, None)
    config = WorkerConfig(pools={"default": 2}, allow_commands=("/bin/sh",))
    await execute(store, Worker(store, config), job_id)
    attempt = only(list(spans.get_finished_spans()), "cronwheel.attempt")
    assert attempt.name == "cronwheel.attempt command /bin/sh"
    assert (attempt.attributes or {})["cronwheel.action"] == "command"
    [run] = await store.list_runs("default", job_id=job_id)
    [done] = await store.list_attempts("default", run.id)
    assert json.loads(done.output or "{}")["stdout"] == traceparent_of(attempt) + "\n"


async def test_workers_that_trace_link_to_the_caller_when_the_api_does_not(
    store: Store,
) -> None:
    """Tracing off in the API: the request's own traceparent is kept with the job."""
    assert tracing.tracer() is None
    job_id = await create(store, {"type": "handler", "name": "noop"}, CALLER.upper())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        await execute(store, a_worker(store, {"noop": lambda ctx: None}), job_id)
    finally:
        tracing.configure(None)
    [attempt] = exporter.get_finished_spans()
    [link] = attempt.links
    assert (link.context.trace_id, link.context.span_id) == (
        int(CALLER_TRACE, 16),
        int(CALLER_SPAN, 16),
    )


class Deciding(Sampler):
    """Samples the spans whose name ends with "kept", and remembers the attributes each
    span was started with (what a sampler is shown before it decides)."""

    def __init__(self) -> None:
        self.shown: dict[str, dict[str, Any]] = {}

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.shown[name] = dict(attributes or {})
        kept = name.endswith("kept")
        return SamplingResult(Decision.RECORD_AND_SAMPLE if kept else Decision.DROP, attributes)

    def get_description(self) -> str:
        return "Deciding"


async def test_an_unsampled_attempt_builds_no_attributes_and_a_sampled_one_has_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An attempt the sampler drops costs its span and context only (issue 28: sampling
    # 1 in 10 still cost the worker 17-18 us a run, building attributes nobody kept).
    built: list[int] = []
    attributes = tracing._attributes

    def counted(claimed: Any, *args: Any) -> dict[str, Any]:
        built.append(claimed.run.id)
        return attributes(claimed, *args)

    monkeypatch.setattr(tracing, "_attributes", counted, raising=False)
    sampler, exporter = Deciding(), InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        seen: dict[str, RunContext] = {}
        worker = a_worker(
            store,
            {
                name: (lambda ctx, name=name: seen.setdefault(name, ctx))
                for name in ("kept", "dropped")
            },
        )
        kept = await create(store, {"type": "handler", "name": "kept"}, None, "kept-job")
        dropped = await create(store, {"type": "handler", "name": "dropped"}, None, "dropped")
        await execute(store, worker, kept)
        await execute(store, worker, dropped)
    finally:
        tracing.configure(None)
        provider.shutdown()
    [kept_run] = await store.list_runs("default", job_id=kept)
    [dropped_run] = await store.list_runs("default", job_id=dropped)
    assert built == [kept_run.id]
    # The sampler decides on the span's name, kind and links: no attributes yet.
    shown = {k: v for k, v in sampler.shown.items() if k.startswith("cronwheel.attempt")}
    assert shown == {"cronwheel.attempt kept": {}, "cronwheel.attempt dropped": {}}
    [span] = [s for s in exporter.get_finished_spans() if s.name.startswith("cronwheel.attempt")]
    assert span.name == "cronwheel.attempt kept"
    assert {
        k: v for k, v in (span.attributes or {}).items() if k != "cronwheel.start_lag_seconds"
    } == {
        "cronwheel.run.id": kept_run.id,
        "cronwheel.job.id": kept,
        "cronwheel.job.name": "kept-job",
        "cronwheel.tenant": "default",
        "cronwheel.pool": "default",
        "cronwheel.attempt": 1,
        "cronwheel.fence": kept_run.fence,
        "cronwheel.scheduled_for": kept_run.scheduled_for.isoformat(),
        "cronwheel.action": "handler",
        "cronwheel.engine.worker.id": worker.id,
        "cronwheel.outcome": "succeeded",
    }
    assert dict(seen["kept"].trace) == {"traceparent": traceparent_of(span)}
    # A dropped attempt still hands on its (unsampled) context, as before.
    assert dropped_run.state.value == "succeeded"
    [traceparent] = seen["dropped"].trace.values()
    assert tracing.TRACEPARENT.match(traceparent)
    assert not int(traceparent[-2:], 16) & 1  # its sampled flag is off


async def test_tracing_off_makes_no_span_and_sends_no_traceparent(store: Store) -> None:
    assert tracing.tracer() is None
    seen: list[RunContext] = []
    with webhook_target() as target:
        hook = await create(store, {"type": "webhook", "url": f"{target.url}/hook"}, CALLER)
        worker = a_worker(store, {"traced": seen.append})
        await execute(store, worker, hook)
        async with api(store) as client:
            spec = {"name": "h", "schedule": {"kind": "immediate"}}
            spec["action"] = {"type": "handler", "name": "traced"}
            handler_job = (await client.post("/v1/jobs", json=spec)).json()["id"]
        await execute(store, worker, handler_job)
    [received] = target.received
    assert not {k.lower() for k in received.headers} & {"traceparent", "tracestate"}
    [ctx] = seen
    assert dict(ctx.trace) == {}


async def test_a_malformed_traceparent_is_ignored(store: Store) -> None:
    job_id = await create(store, {"type": "handler", "name": "noop"}, "00-nothex-00f067aa-01")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.configure(provider)
    try:
        await execute(store, a_worker(store, {"noop": lambda ctx: None}), job_id)
    finally:
        tracing.configure(None)
    [attempt] = exporter.get_finished_spans()
    assert attempt.links == ()


# -- without the extra, and the OTEL_* rule: real processes ---------------------------
def blocking(*packages: str) -> str:
    """Code that makes ``packages`` (and their submodules) unimportable, as if absent."""
    return f"""
import importlib.abc, sys

class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in {packages!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None

sys.meta_path.insert(0, _Absent())
"""


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | env
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
    )


RUN_A_JOB = """
import asyncio, logging
from cronwheel import connect
from cronwheel.observability import tracing
from cronwheel.engine.worker import Worker, WorkerConfig
logging.basicConfig()

async def main(path):
    assert tracing.tracer() is None
    assert tracing.setup_from_env() is False
    seen = []
    async with await connect("sqlite:///" + path) as jobs:
        job = await jobs.create(name="j", schedule={"kind": "immediate"},
                                action={"type": "handler", "name": "h"})
        worker = Worker(jobs.store, WorkerConfig(pools={"default": 1}), webhook_secret=b"s" * 32)
        worker.handler("h")(seen.append)
        assert await worker.run_once() == 1
        [run] = await jobs.runs(job.id)
        assert run.state.value == "succeeded", run
        assert dict(seen[0].trace) == {}
    print("ran untraced")
"""


@pytest.mark.parametrize(
    "absent",
    [
        # What the otel extra adds (FastAPI itself requires opentelemetry-api): the API too.
        ("opentelemetry.sdk", "opentelemetry.exporter"),
        # No OpenTelemetry at all: the worker, the scheduler and the Python API still run.
        ("opentelemetry",),
    ],
)
def test_cronwheel_runs_without_the_otel_packages(tmp_path: Any, absent: tuple[str, ...]) -> None:
    """OTEL_* asks for traces but the packages are missing: cronwheel imports, says once
    that tracing is off and how to turn it on, and runs a job."""
    code = blocking(*absent) + RUN_A_JOB
    if "opentelemetry" not in absent:
        code += "import cronwheel.api\n"
    code += f"asyncio.run(main({str(tmp_path / 'db.sqlite')!r}))\n"
    done = python(code, OTEL_TRACES_EXPORTER="otlp")
    assert done.returncode == 0, done.stderr
    assert "ran untraced" in done.stdout
    assert "OTEL_* settings ask for traces but OpenTelemetry is not installed" in done.stderr
    assert "pip install 'cronwheel[otel]'" in done.stderr


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),
        ({"OTEL_SERVICE_NAME": "billing"}, False),
        ({"OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_TRACES_EXPORTER": "console"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
    ],
)
def test_only_otel_settings_that_ask_for_traces_turn_them_on(
    env: dict[str, str], expected: bool
) -> None:
    assert tracing.enabled_by_env(env) is expected


def test_setup_from_env_installs_a_provider_with_the_service_name() -> None:
    code = """
from opentelemetry import trace
from cronwheel.observability import tracing
assert tracing.tracer() is None
assert tracing.setup_from_env() is True
provider = trace.get_tracer_provider()
print(provider.resource.attributes["service.name"], tracing.tracer() is not None)
"""
    done = python(code, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="billing-worker")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["billing-worker", "True"]
    done = python(code, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cronwheel", "True"]


def test_an_unknown_exporter_is_bad_input_for_the_commands(tmp_path: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cronwheel", "worker", "--db", str(tmp_path / "db.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"OTEL_TRACES_EXPORTER": "jaeger-thrift", "CRONWHEEL_WEBHOOK_SECRET": "x"},
    )
    assert done.returncode == 2, done.stderr
    assert "OTEL_TRACES_EXPORTER" in done.stderr and "jaeger-thrift" in done.stderr
    assert "Traceback" not in done.stderr


async def test_the_attempt_span_is_current_while_an_async_handler_runs(
    store: Store, spans: InMemorySpanExporter
) -> None:
    """A handler's own spans (made with the global API) are children of the attempt's
    when it uses our provider: here, the one configured for cronwheel."""
    provider = tracing._configured
    assert provider is not None

    async def traced(ctx: RunContext) -> None:
        with provider.get_tracer("user").start_as_current_span("user work"):
            await asyncio.sleep(0)

    job_id = await create(store, {"type": "handler", "name": "traced"}, None)
    await execute(store, a_worker(store, {"traced": traced}), job_id)
    found = list(spans.get_finished_spans())
    attempt, user = only(found, "cronwheel.attempt"), only(found, "user work")
    assert user.parent is not None and user.parent.span_id == attempt.context.span_id


async def test_jobs_created_from_traced_python_code_link_to_its_span(
    store: Store, spans: InMemorySpanExporter
) -> None:
    """The Python API (cronwheel.connect's JobService) keeps the caller's current span."""
    provider = tracing._configured
    assert provider is not None
    service = JobService(store)
    with provider.get_tracer("user").start_as_current_span("nightly setup") as user:
        job = await service.create(
            name="from-python",
            schedule={"kind": "immediate"},
            action={"type": "handler", "name": "noop"},
        )
    await execute(store, a_worker(store, {"noop": lambda ctx: None}), job.id)
    [link] = only(list(spans.get_finished_spans()), "cronwheel.attempt").links
    assert link.context.span_id == user.get_span_context().span_id


async def test_the_sdk_sends_the_callers_span_to_the_api(
    store: Store, spans: InMemorySpanExporter
) -> None:
    provider = tracing._configured
    assert provider is not None
    # The webhook targets listen on 127.0.0.1: allowed, as an operator would.
    app = create_app(
        store, auth=AuthConfig(admin_token=ADMIN_TOKEN), egress=EgressPolicy().also(*LOOPBACK)
    )
    transport = httpx.ASGITransport(app=app)
    async with AsyncClient("http://test", ADMIN_TOKEN, transport=transport) as client:
        with provider.get_tracer("user").start_as_current_span("deploy") as user:
            await client.create_job(
                {
                    "name": "from-the-sdk",
                    "schedule": {"kind": "manual"},
                    "action": {"type": "handler", "name": "noop"},
                }
            )
    request = only(list(spans.get_finished_spans()), "cronwheel.api create jobs")
    assert request.parent is not None
    assert request.parent.span_id == user.get_span_context().span_id


async def test_a_publish_carries_the_attempt_span_to_the_consumer(
    store: Store, spans: InMemorySpanExporter
) -> None:
    """Issue 30 item 2: the span is named for the broker, and the message's headers carry
    its context as a webhook's request does."""
    from tests.engine.brokers import URLS, destination

    async with destination("redis") as dest:
        action = {"type": "publish", "broker": "events", "to": dest.to}
        job_id = await create(store, action, None)
        config = WorkerConfig(pools={"default": 2}, brokers={"events": URLS["redis"]})
        worker = Worker(store, config, webhook_secret=b"s" * 32)
        await execute(store, worker, job_id)
        await worker.publisher.close()
        [message] = await dest.received()
    attempt = only(list(spans.get_finished_spans()), "cronwheel.attempt")
    assert attempt.name == "cronwheel.attempt publish events"
    assert (attempt.attributes or {})["cronwheel.action"] == "publish"
    assert message.headers["traceparent"] == traceparent_of(attempt)
