"""Tracing with OpenTelemetry, when the ``otel`` extra is installed and asked for.

The rest of cronwheel calls this module only. Without the extra, or with nothing
configured, :func:`tracer` answers None and nothing else here runs: a worker checks that
once per claimed batch. A span per attempt links to the span of the API request that
created its job (its W3C ``traceparent``, stored with the job); its own context goes out
on webhooks and to handlers (``ctx.trace``). See docs/observability.md#traces and
docs/decisions/0019-tracing-enabling-and-links.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Awaitable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from cronwheel._version import installed_version
from cronwheel.errors import InvalidInput

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

    from cronwheel.core.lifecycle import Outcome
    from cronwheel.core.model import ClaimedRun

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace as otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # the otel extra is not installed: tracing stays off
    otel_trace = None  # type: ignore[assignment]

log = logging.getLogger("cronwheel.tracing")


class Traced(Protocol):
    """What an attempt's span hands its trace context to: the run's
    :class:`~cronwheel.actions.RunContext`."""

    trace: Mapping[str, str]


INSTALL_HINT = "pip install 'cronwheel[otel]'"
TRACEPARENT = re.compile(r"^[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
"""A W3C traceparent we keep; any other value is ignored, as the W3C spec says."""

_configured: TracerProvider | None = None
_cache: tuple[object, Tracer] | None = None


def available() -> bool:
    """True when the OpenTelemetry packages (the ``otel`` extra) can be imported."""
    return otel_trace is not None


def enabled_by_env(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard ``OTEL_*`` variables ask for traces. Nothing set means no:
    ``OTEL_TRACES_EXPORTER`` names an exporter other than ``none``, or an OTLP endpoint
    is set (then OTLP is the exporter); ``OTEL_SDK_DISABLED=true`` turns everything off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER")
    if exporters is not None:
        return _names(exporters) not in ([], ["none"])
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def setup_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    """Called by every long-running command at its start: install a tracer provider
    with the exporters ``OTEL_*`` asks for; True if tracing is now on. A provider
    someone else installed (``opentelemetry-instrument``, the user's app) is kept.
    Raises :class:`InvalidInput` naming the variable when it asks for what cannot be."""
    if not enabled_by_env(environ):
        return False
    if otel_trace is not None and _global_provider() is not None:
        return True
    try:  # FastAPI brings opentelemetry-api; the SDK comes with the otel extra
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_* settings ask for traces but OpenTelemetry is not installed: tracing is"
            " off; install it with %s",
            INSTALL_HINT,
        )
        return False

    named = "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    own = {} if environ.get("OTEL_SERVICE_NAME") or named else {"service.name": "cronwheel"}
    provider = TracerProvider(resource=Resource.create(own))
    for name in _names(environ.get("OTEL_TRACES_EXPORTER", "otlp")):
        provider.add_span_processor(BatchSpanProcessor(_exporter(name, environ)))
    otel_trace.set_tracer_provider(provider)
    return True


def configure(provider: TracerProvider | None) -> None:
    """Trace with ``provider`` instead of the global one (None: back to the global).
    For programs that embed cronwheel and keep their own providers, and for tests."""
    global _configured, _cache
    _configured, _cache = provider, None


def tracer() -> Tracer | None:
    """cronwheel's tracer, or None when tracing is off (no provider was installed)."""
    global _cache
    if otel_trace is None:
        return None
    provider = _configured or _global_provider()
    if provider is None:
        return None
    cached = _cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    found = provider.get_tracer("cronwheel", installed_version())
    _cache = (provider, found)
    return found


def current_headers() -> dict[str, str]:
    """The W3C headers of the caller's current span, if it has a valid one, else {}: what
    a job created from traced code (the Python API, the SDK) links its attempts to."""
    if otel_trace is None or not otel_trace.get_current_span().get_span_context().is_valid:
        return {}
    return _headers()


def request_traceparent(headers: Mapping[str, str]) -> str | None:
    """An incoming request's own ``traceparent``, if it has a valid one."""
    value = headers.get("traceparent")
    if value is None:
        return None
    value = value.strip().lower()
    return value if TRACEPARENT.match(value) else None


@contextlib.contextmanager
def creating_jobs(headers: Mapping[str, str], tenant_id: str, count: int) -> Iterator[str | None]:
    """Around an API request that creates jobs: the ``traceparent`` to store with them.
    Tracing on: a span of ours (child of the request's context, or of the server span of
    an instrumented app), whose context it is. Off: the request's own header, so that
    workers that trace still link to the caller's span."""
    found = tracer()
    if found is None:
        yield request_traceparent(headers)
        return
    current = otel_trace.get_current_span()
    if current.get_span_context().is_valid:
        parent, kind = None, otel_trace.SpanKind.INTERNAL  # an instrumented server's span
    else:
        parent = TraceContextTextMapPropagator().extract(headers)
        kind = otel_trace.SpanKind.SERVER
    attributes: dict[str, str | int] = {"cronwheel.tenant": tenant_id, "cronwheel.jobs": count}
    with found.start_as_current_span(
        "cronwheel.api create jobs", context=parent, kind=kind, attributes=attributes
    ) as span:
        yield _headers()["traceparent"] if span.get_span_context().is_valid else None


async def attempt(
    found: Tracer,
    claimed: ClaimedRun,
    ctx: Traced,
    started: datetime,
    worker_id: str,
    execute: Awaitable[Outcome],
) -> Outcome:
    """Run ``execute`` (an attempt's action) inside its span: a new trace, linked to the
    request that created the job; ``ctx.trace`` carries its context to the action."""
    # Here, not at the top: the SDK and the CLI's remote commands import this module for
    # current_headers(), and the run model costs each of their processes about a tenth
    # of its start (a worker, which calls this, has it loaded already).
    from cronwheel.core.lifecycle import OutcomeKind

    kind = claimed.action.get("type")
    target = (
        "webhook"
        if kind == "webhook"
        else f"publish {claimed.action.get('broker')}"
        if kind == "publish"
        else f"command {(claimed.action.get('argv') or ['?'])[0]}"
        if kind == "command"
        else str(claimed.action.get("name"))
    )
    with found.start_as_current_span(
        f"cronwheel.attempt {target}",
        # A root: scheduled work runs long after (and often many times after) the request
        # that created it, so it links to that request instead of growing its trace.
        context=otel_context.Context(),
        kind=otel_trace.SpanKind.CONSUMER,
        links=_links(claimed.traceparent),
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        # The attributes are made only for a span that records: an attempt the sampler
        # dropped costs its span and its context, not eleven attributes (an isoformat
        # among them) that nothing would keep (+17-18 us a run sampled 1 in 10 before:
        # bench/README.md, "Each feature's cost per run"). A sampler therefore sees the
        # span's name, kind and links, not these attributes.
        recording = span.is_recording()
        if recording:
            span.set_attributes(_attributes(claimed, kind, started, worker_id))
        ctx.trace = _headers()
        outcome = await execute
        if recording:
            span.set_attribute("cronwheel.outcome", outcome.kind.value)
            if outcome.kind is not OutcomeKind.SUCCEEDED:
                if outcome.error_class:
                    span.set_attribute("error.type", outcome.error_class)
                message = f"{outcome.error_class}: {outcome.error_message}"
                span.set_status(otel_trace.Status(otel_trace.StatusCode.ERROR, message))
    return outcome


def _attributes(
    claimed: ClaimedRun, kind: object, started: datetime, worker_id: str
) -> dict[str, Any]:
    """An attempt span's attributes (docs/observability.md#traces)."""
    run = claimed.run
    return {
        "cronwheel.run.id": run.id,
        "cronwheel.job.id": run.job_id,
        "cronwheel.job.name": claimed.job_name,
        "cronwheel.tenant": run.tenant_id,
        "cronwheel.pool": run.pool,
        "cronwheel.attempt": run.attempt,
        "cronwheel.fence": run.fence,
        "cronwheel.scheduled_for": run.scheduled_for.isoformat(),
        "cronwheel.start_lag_seconds": (started - run.available_at).total_seconds(),
        "cronwheel.action": kind if kind in ("webhook", "publish", "command") else "handler",
        "cronwheel.engine.worker.id": worker_id,
    }


def _links(traceparent: str | None) -> list[Any]:
    if not traceparent:
        return []
    creator = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    span_context = otel_trace.get_current_span(creator).get_span_context()
    if not span_context.is_valid:
        return []
    return [otel_trace.Link(span_context, {"cronwheel.link": "created_by"})]


def _headers() -> dict[str, str]:
    """The current span's W3C headers (``traceparent``, and ``tracestate`` if any)."""
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier


def _global_provider() -> TracerProvider | None:
    """The globally installed provider, or None while it is the API's default (no-op)."""
    provider = otel_trace.get_tracer_provider()
    if isinstance(provider, otel_trace.ProxyTracerProvider | otel_trace.NoOpTracerProvider):
        return None
    return provider


def _names(value: str) -> list[str]:
    return [n.strip().lower() for n in value.split(",") if n.strip()]


def _exporter(name: str, environ: Mapping[str, str]) -> Any:
    """The span exporter ``OTEL_TRACES_EXPORTER`` names: ``otlp`` (over HTTP unless the
    protocol says grpc), ``console``, or any exporter package's entry point name."""
    if name == "otlp":
        protocol = environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
        )
        name = "otlp_proto_grpc" if protocol.strip() == "grpc" else "otlp_proto_http"
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from importlib import metadata

    found = metadata.entry_points(group="opentelemetry_traces_exporter", name=name)
    for entry in found:
        return entry.load()()
    package = {
        "otlp_proto_http": "opentelemetry-exporter-otlp-proto-http",
        "otlp_proto_grpc": "opentelemetry-exporter-otlp-proto-grpc",
    }.get(name)
    hint = f"install {package}" if package else "use otlp, console or none"
    raise InvalidInput(
        "OTEL_TRACES_EXPORTER", f"no span exporter named {name!r} is installed: {hint}"
    )
