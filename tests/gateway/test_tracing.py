"""W3C trace context and OTLP/HTTP export of the /v1 path (operations contract, issue 14).

The collector is a loopback twisted.web resource that decodes each OTLP/HTTP body as the
protobuf ``ExportTraceServiceRequest`` of the opentelemetry-proto package; the upstream is the
fake OpenAI-compatible one, which records the headers it received.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from twisted.internet import reactor
from twisted.web.resource import Resource
from twisted.web.server import Site

from gateway.observability.tracing import Tracing
from tests.gateway.gateway_case import GatewayTestCase

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


class Collector(Resource):
    """``POST /v1/traces``: keeps every span it was sent."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[Any] = []
        self.content_types: list[bytes] = []

    def render_POST(self, request: Any) -> bytes:
        self.content_types.append(request.getHeader(b"content-type") or b"")
        export = ExportTraceServiceRequest()
        export.ParseFromString(request.content.read())
        for resource_spans in export.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend(scope_spans.spans)
        request.setHeader(b"content-type", b"application/x-protobuf")
        return ExportTraceServiceResponse().SerializeToString()


class TracingTests(GatewayTestCase):
    def open_app(self, **overrides: Any) -> Any:
        self.collector = Collector()
        port = reactor.listenTCP(0, Site(self.collector), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.tracing = Tracing(f"http://127.0.0.1:{port.getHost().port}/v1/traces",
                               schedule_delay_millis=50)
        return super().open_app(tracing=self.tracing, **overrides)

    async def chat(self, headers: dict[str, str] | None = None) -> Any:
        return await self.call("POST", "/v1/chat/completions", {
            "model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]},
            token=self.api_key, headers=headers)

    async def exported(self) -> list[Any]:
        assert await self.tracing.flush(reactor)
        return list(self.collector.spans)

    async def test_client_trace_continues_through_attempts_to_the_upstream(self) -> None:
        await self.provision(upstream_model="gpt-fake+fail-503")
        backup = await self.catalog.channel(self.uc_id, "backup", base_url=self.fake.base_url,
                                            priority=0)
        await self.catalog.config(backup, self.model_id)
        await self.catalog.announce()
        answer = await self.chat({"traceparent": TRACEPARENT})
        assert answer.status == 200, answer
        spans = await self.exported()
        assert self.collector.content_types[0] == b"application/x-protobuf"
        (server,) = [s for s in spans if s.kind == SpanProto.SPAN_KIND_SERVER]
        attempts = [s for s in spans if s.kind == SpanProto.SPAN_KIND_CLIENT]
        assert server.name == "POST /v1/chat/completions"
        assert server.trace_id.hex() == CLIENT_TRACE
        assert server.parent_span_id.hex() == CLIENT_SPAN
        assert len(attempts) == 2
        for attempt in attempts:
            assert attempt.trace_id.hex() == CLIENT_TRACE
            assert attempt.parent_span_id == server.span_id
        outcomes = {
            {a.key: a.value for a in [*attempt.attributes]}["lockgate.channel_id"].int_value:
            {a.key: a.value for a in [*attempt.attributes]}["lockgate.outcome"].string_value
            for attempt in attempts}
        assert outcomes == {self.channel_id: "status_5xx", backup: "ok"}
        # each upstream request carried the traceparent of its own attempt span
        sent = [r.headers.get("traceparent") for r in self.fake.requests]
        assert sent == [f"00-{CLIENT_TRACE}-{a.span_id.hex()}-01" for a in
                        sorted(attempts, key=lambda a: a.start_time_unix_nano)]

    async def test_a_call_without_traceparent_starts_a_trace(self) -> None:
        await self.provision()
        answer = await self.chat()
        assert answer.status == 200, answer
        spans = await self.exported()
        (server,) = [s for s in spans if s.kind == SpanProto.SPAN_KIND_SERVER]
        (attempt,) = [s for s in spans if s.kind == SpanProto.SPAN_KIND_CLIENT]
        assert server.parent_span_id == b""
        assert attempt.trace_id == server.trace_id
        version, trace_id, span_id, _flags = self.fake.requests[0].headers[
            "traceparent"].split("-")
        assert (version, trace_id, span_id) == ("00", server.trace_id.hex(),
                                                attempt.span_id.hex())


class UntracedTests(GatewayTestCase):
    async def test_client_traceparent_is_forwarded_unchanged(self) -> None:
        await self.provision()
        assert self.gateway.tracing is None
        answer = await self.call("POST", "/v1/chat/completions", {
            "model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]},
            token=self.api_key, headers={"traceparent": TRACEPARENT, "tracestate": "k=v"})
        assert answer.status == 200, answer
        assert self.fake.requests[0].headers["traceparent"] == TRACEPARENT
        assert self.fake.requests[0].headers["tracestate"] == "k=v"
        plain = await self.call("POST", "/v1/chat/completions", {
            "model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]},
            token=self.api_key)
        assert plain.status == 200
        assert "traceparent" not in self.fake.requests[1].headers
