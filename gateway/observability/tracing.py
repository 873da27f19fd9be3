"""OpenTelemetry traces of the /v1 path, exported over OTLP/HTTP when ``--otlp-endpoint`` is set.

What a trace holds: one SERVER span per /v1 call (a child of the client's W3C ``traceparent``
when it sent one) and one CLIENT span per upstream attempt, whose ``traceparent`` goes to the
upstream, so the upstream's own spans join the same trace.

Why it is built like this: the SDK's ``BatchSpanProcessor`` exports from its own thread, so the
reactor never waits on the collector; the provider is private to the app (no global
``set_tracer_provider``), as tests run several apps in one process.  Without the option no
``Tracing`` exists, the hot path makes no tracer call, and a client's ``traceparent`` is passed
to the upstream unchanged.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool

TRACEPARENT = b"traceparent"
TRACESTATE = b"tracestate"
_PROPAGATOR = TraceContextTextMapPropagator()


class Tracing:
    """The app's tracer provider and the few span operations the /v1 path needs."""

    def __init__(self, endpoint: str | None = None, *, version: str = "dev",
                 exporter: SpanExporter | None = None, schedule_delay_millis: float = 1000
                 ) -> None:
        self.provider = TracerProvider(resource=Resource.create(
            {"service.name": "lockgate", "service.version": version}))
        self.provider.add_span_processor(BatchSpanProcessor(
            exporter if exporter is not None else OTLPSpanExporter(endpoint=endpoint),
            schedule_delay_millis=schedule_delay_millis))
        self.tracer = self.provider.get_tracer("lockgate.gateway", version)

    def request_span(self, request: Any, name: str) -> Span:
        """The SERVER span of one call, continuing the client's trace when it sent one."""
        carrier = {}
        headers = request.requestHeaders
        for header in (TRACEPARENT, TRACESTATE):
            values = headers.getRawHeaders(header)
            if values:
                carrier[header.decode()] = values[0].decode("latin-1")
        parent = _PROPAGATOR.extract(carrier) if carrier else None
        return self.tracer.start_span(name, context=parent, kind=SpanKind.SERVER)

    def attempt_span(self, parent: Span, channel_id: int) -> Span:
        """A CLIENT span for one upstream attempt, child of the call's span."""
        span = self.tracer.start_span("upstream attempt", context=set_span_in_context(parent),
                                      kind=SpanKind.CLIENT)
        span.set_attribute("lockgate.channel_id", channel_id)
        return span

    @staticmethod
    def headers_for(span: Span) -> dict[bytes, list[bytes]]:
        """``traceparent`` (and ``tracestate``) naming ``span``, for the upstream request."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=set_span_in_context(span))
        return {name.encode(): [value.encode("latin-1")] for name, value in carrier.items()}

    @staticmethod
    def end_attempt(span: Span, outcome: str) -> None:
        span.set_attribute("lockgate.outcome", outcome)
        if outcome != "ok":
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end()

    @staticmethod
    def end_request(span: Span, status: int) -> None:
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def flush(self, reactor: Any) -> Deferred[bool]:
        """Export every finished span now (in a thread: the export may need this reactor)."""
        return deferToThreadPool(reactor, reactor.getThreadPool(), self.provider.force_flush)

    def close(self, reactor: Any) -> Deferred[None]:
        """Export what is left and stop the export thread (on shutdown)."""
        return deferToThreadPool(reactor, reactor.getThreadPool(), self.provider.shutdown)


def client_trace_headers(request: Any) -> dict[bytes, list[bytes]] | None:
    """Without tracing: the client's own ``traceparent``/``tracestate``, passed on unchanged."""
    headers = request.requestHeaders
    parent = headers.getRawHeaders(TRACEPARENT)
    if not parent:
        return None
    forwarded = {TRACEPARENT: parent[:1]}
    state = headers.getRawHeaders(TRACESTATE)
    if state:
        forwarded[TRACESTATE] = state[:1]
    return forwarded
