"""UpstreamClient against the fake upstream over real loopback sockets (timers on a Clock)."""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock, deferLater
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.http_headers import Headers

from gateway.channels.http import (
    BodyTooLarge,
    UpstreamAborted,
    UpstreamClient,
    UpstreamResponse,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from gateway.protocols.sse import SSEParser
from tests.support.upstream import FakeUpstream, content_piece, count_prompt_tokens
from tests.support.waiting import wait_for

JSON = {b"content-type": [b"application/json"]}




class Sink:
    """Collects a delivered body; ``done`` fires with the end reason (None when clean)."""

    def __init__(self) -> None:
        self.parser = SSEParser()
        self.events: list[bytes] = []
        self.raw = b""
        self.reason: Failure | None = None
        self.finished = False

    def data_received(self, data: bytes) -> None:
        self.raw += data
        self.events.extend(e.data for e in self.parser.feed(data))

    def body_finished(self, reason: Failure | None) -> None:
        assert not self.finished, "body_finished called twice"
        self.finished = True
        self.reason = reason

    def contents(self) -> list[str]:
        out = []
        for data in self.events:
            if data != b"[DONE]":
                choices = orjson.loads(data).get("choices") or [{}]
                piece = choices[0].get("delta", {}).get("content")
                if piece:
                    out.append(piece)
        return out


class UpstreamClientTests(TestCase):
    def setUp(self) -> None:
        self.fake = FakeUpstream.start()
        self.addCleanup(self.fake.stop)
        self.clock = Clock()
        self.client = UpstreamClient(reactor, clock=self.clock)
        self.addCleanup(self.client.close)

    def chat(self, model: str = "gpt-fake", stream: bool = False, **extra: Any
             ) -> Deferred[UpstreamResponse]:
        body = {"model": model, "messages": [{"role": "user", "content": "say three words"}],
                "stream": stream, **extra}
        return self.client.request("POST", self.fake.url("/v1/chat/completions"), JSON,
                                   orjson.dumps(body), first_byte_timeout=5)

    async def test_json_body_and_persistent_connection_reuse(self) -> None:
        for _ in range(3):
            response = await self.chat()
            assert response.code == 200
            assert response.header(b"content-type") == b"application/json"
            body = orjson.loads(await response.read_all(1 << 20))
            assert body["choices"][0]["message"]["content"] == "tok0 tok1 tok2 "
            assert body["usage"]["prompt_tokens"] == 3 == count_prompt_tokens(
                self.fake.requests[-1].body)
        assert self.fake.request_count == 3
        assert self.fake.connections_made == 1
        assert self.fake.requests[0].headers["content-type"] == "application/json"
        assert self.fake.requests[0].body["messages"][0]["content"] == "say three words"

    async def test_request_line_and_host_per_url_and_the_callers_headers_untouched(self) -> None:
        """URL work is cached per URL: each URL must still get its own path, query and Host."""
        caller_headers = Headers({b"accept": [b"application/json"]})
        for path in ("/v1/models", "/v1/models?limit=2", "/v1/models"):
            response = await self.client.request("GET", self.fake.url(path), caller_headers,
                                                 None, first_byte_timeout=5)
            await response.read_all(1 << 20)
            seen = self.fake.requests[-1]
            assert (seen.method, seen.path) == ("GET", "/v1/models")
            assert seen.query == (b"limit=2" if "?" in path else b"")
            assert seen.headers["host"] == self.fake.base_url.removeprefix("http://")
        assert list(caller_headers.getAllRawHeaders()) == [(b"Accept", [b"application/json"])]
        for bad in (self.fake.url("/v1/mo dels"), self.fake.url("/v1/\r\nx: y"), "not a url"):
            with self.assertRaises(UpstreamUnavailable):
                await self.client.request("GET", bad, None, None, first_byte_timeout=5)
        assert self.fake.request_count == 3

    async def test_error_status_is_a_response_not_a_failure(self) -> None:
        response = await self.chat("gpt+fail-429")
        assert response.code == 429
        assert response.header(b"retry-after") == b"1"
        body = orjson.loads(await response.read_all(1 << 20))
        assert body["error"]["type"] == "rate_limit_exceeded"

    async def test_streamed_body_is_delivered_in_order(self) -> None:
        response = await self.chat("gpt+chunks-5", stream=True,
                                   stream_options={"include_usage": True})
        sink = Sink()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: sink.finished)
        assert sink.reason is None
        assert sink.contents() == [content_piece(i) for i in range(5)]
        assert sink.events[-1] == b"[DONE]"
        assert orjson.loads(sink.events[-2])["usage"]["completion_tokens"] == 5
        assert response.finished

    async def test_first_byte_timeout_cancels_and_closes_the_socket(self) -> None:
        pending = self.chat("gpt+stall-after-0")
        outcome: list[Any] = []
        pending.addBoth(outcome.append)
        await wait_for(lambda: self.fake.request_count == 1)
        assert self.fake.open_connections == 1
        self.clock.advance(4.9)
        assert outcome == []
        self.clock.advance(0.2)
        assert isinstance(outcome[0], Failure) and outcome[0].check(UpstreamTimeout)
        assert outcome[0].value.phase == "first_byte"
        await wait_for(lambda: self.fake.open_connections == 0)

    async def test_connection_refused_is_unavailable(self) -> None:
        port = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        number = port.getHost().port
        await port.stopListening()
        with self.assertRaises(UpstreamUnavailable):
            await self.client.request("GET", f"http://127.0.0.1:{number}/v1/models", None,
                                      None, first_byte_timeout=5)

    async def test_idle_timeout_on_stalled_stream_closes_the_socket(self) -> None:
        response = await self.chat("gpt+chunks-5+stall-after-2", stream=True)
        sink = Sink()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: len(sink.contents()) == 2)
        self.clock.advance(29)
        assert not sink.finished
        assert self.fake.open_connections == 1
        self.clock.advance(1.5)
        assert sink.finished
        assert sink.reason is not None and sink.reason.check(UpstreamTimeout)
        assert sink.reason.value.phase == "idle"
        await wait_for(lambda: self.fake.open_connections == 0)
        assert self.fake.streams_cancelled == 1

    async def test_abort_closes_the_socket_at_once(self) -> None:
        response = await self.chat("gpt+stall-after-1", stream=True)
        sink = Sink()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: len(sink.contents()) == 1)
        response.abort()
        assert sink.finished and sink.reason is not None
        assert sink.reason.check(UpstreamAborted)
        await wait_for(lambda: self.fake.open_connections == 0)
        # the pool opens a fresh connection for the next request
        again = await self.chat()
        assert again.code == 200
        await again.read_all(1 << 20)
        assert self.fake.connections_made == 2

    async def test_abort_before_delivery_closes_the_socket(self) -> None:
        response = await self.chat("gpt+stall-after-1", stream=True)
        response.abort()
        response.abort()
        await wait_for(lambda: self.fake.open_connections == 0)
        sink = Sink()  # delivering after the abort ends the body at once
        response.deliver(sink, idle_timeout=30)
        assert sink.finished and sink.reason is not None
        assert sink.reason.check(UpstreamAborted)

    async def test_read_all_size_limit(self) -> None:
        response = await self.chat("gpt+chunks-50")
        with self.assertRaises(BodyTooLarge):
            await response.read_all(100)
        await wait_for(lambda: self.fake.open_connections == 0)

    async def test_upstream_dropping_mid_body_is_a_failure(self) -> None:
        response = await self.chat("gpt+chunks-5+drop-after-2", stream=True)
        sink = Sink()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: sink.finished)
        assert sink.reason is not None and not sink.reason.check(UpstreamTimeout)
        assert len(sink.contents()) == 2

    async def test_pause_stops_delivery_until_resume(self) -> None:
        response = await self.chat("gpt+chunks-20+pace-0.005", stream=True)
        sink = Sink()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: len(sink.contents()) >= 1)
        response.pause()
        response.pause()
        assert response.pause_count == 1
        seen = len(sink.raw)
        await deferLater(reactor, 0.2, lambda: None)
        assert len(sink.raw) == seen
        # paused by us: the idle timer does not blame the upstream
        self.clock.advance(100)
        assert not sink.finished
        response.resume()
        await wait_for(lambda: sink.finished)
        assert sink.reason is None
        assert len(sink.contents()) == 20

    async def test_concurrency_cap_queues_requests_per_host(self) -> None:
        client = UpstreamClient(reactor, clock=self.clock, max_concurrent_per_host=1)
        self.addCleanup(client.close)
        body = orjson.dumps({"model": "gpt+stall-after-1", "stream": True, "messages": []})
        url = self.fake.url("/v1/chat/completions")
        first = await client.request("POST", url, JSON, body, first_byte_timeout=5)
        second = client.request("POST", url, JSON, body, first_byte_timeout=5)
        await deferLater(reactor, 0.05, lambda: None)
        assert self.fake.request_count == 1 and not second.called
        first.abort()
        response = await second
        assert self.fake.request_count == 2
        response.abort()

    async def test_queued_request_times_out_waiting_for_a_slot(self) -> None:
        client = UpstreamClient(reactor, clock=self.clock, max_concurrent_per_host=1)
        self.addCleanup(client.close)
        body = orjson.dumps({"model": "gpt+stall-after-1", "stream": True, "messages": []})
        url = self.fake.url("/v1/chat/completions")
        first = await client.request("POST", url, JSON, body, first_byte_timeout=5)
        second = client.request("POST", url, JSON, body, first_byte_timeout=5)
        self.clock.advance(6)
        self.failureResultOf(second, UpstreamTimeout)
        first.abort()
        third = await client.request("POST", url, JSON, body, first_byte_timeout=5)
        third.abort()
        assert self.fake.request_count == 2

    async def test_many_concurrent_requests(self) -> None:
        responses = await gatherResults([self.chat() for _ in range(30)])
        bodies = await gatherResults([r.read_all(1 << 20) for r in responses])
        assert all(orjson.loads(b)["object"] == "chat.completion" for b in bodies)
        assert self.fake.connections_made <= 30


def multipart(fields: dict[str, bytes]) -> tuple[bytes, bytes]:
    boundary = b"lockgateboundary"
    body = b""
    for name, value in fields.items():
        filename = b'; filename="a.bin"' if name in ("file", "image") else b""
        body += (b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"" +
                 name.encode() + b"\"" + filename + b"\r\n\r\n" + value + b"\r\n")
    body += b"--" + boundary + b"--\r\n"
    return body, b"multipart/form-data; boundary=" + boundary


class FakeUpstreamRouteTests(TestCase):
    """The fake's other routes answer as documented (other tests rely on these shapes)."""

    def setUp(self) -> None:
        self.fake = FakeUpstream.start()
        self.addCleanup(self.fake.stop)
        self.client = UpstreamClient(reactor)
        self.addCleanup(self.client.close)

    async def post(self, path: str, payload: Any, content_type: bytes = b"application/json",
                   headers: dict[bytes, list[bytes]] | None = None) -> tuple[int, bytes]:
        body = payload if isinstance(payload, bytes) else orjson.dumps(payload)
        response = await self.client.request(
            "POST", self.fake.url(path), {b"content-type": [content_type], **(headers or {})},
            body, first_byte_timeout=5)
        return response.code, await response.read_all(1 << 22)

    async def test_responses_stream_and_json(self) -> None:
        code, raw = await self.post("/v1/responses", {
            "model": "gpt+chunks-2", "input": "one two three", "instructions": "be brief",
            "stream": True})
        events = SSEParser().feed(raw)
        kinds = [e.event for e in events]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        assert kinds.count("response.output_text.delta") == 2
        usage = orjson.loads(events[-1].data)["response"]["usage"]
        assert usage == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
                         "input_tokens_details": {"cached_tokens": 0},
                         "output_tokens_details": {"reasoning_tokens": 0}}
        code, raw = await self.post("/v1/responses", {"model": "gpt+no-usage", "input": "x"})
        body = orjson.loads(raw)
        assert code == 200 and body["usage"] is None
        assert body["output"][0]["content"][0]["text"] == "tok0 tok1 tok2 "

    async def test_chat_stream_usage_only_when_asked_and_tool_calls(self) -> None:
        _, raw = await self.post("/v1/chat/completions", {
            "model": "gpt", "stream": True, "messages": [{"role": "user", "content": "a b"}]})
        assert b'"usage"' not in raw and raw.endswith(b"data: [DONE]\n\n")
        _, raw = await self.post("/v1/chat/completions", {
            "model": "gpt+tools", "messages": [{"role": "user", "content": "weather?"}],
            "tools": [{"type": "function", "function": {"name": "lookup"}}]})
        message = orjson.loads(raw)["choices"][0]
        assert message["finish_reason"] == "tool_calls"
        call = message["message"]["tool_calls"][0]["function"]
        assert call["name"] == "lookup" and orjson.loads(call["arguments"])["location"] == "Paris"
        _, raw = await self.post("/v1/chat/completions", {
            "model": "gpt", "max_tokens": 2, "messages": []})
        answer = orjson.loads(raw)
        assert answer["choices"][0]["finish_reason"] == "length"
        assert answer["usage"]["completion_tokens"] == 2

    async def test_error_mid_stream(self) -> None:
        _, raw = await self.post("/v1/chat/completions", {
            "model": "gpt+error-mid-stream+chunks-5", "stream": True, "messages": []})
        assert raw.count(b'"content":"tok') == 2
        assert raw.endswith(b"fake upstream failed mid-stream\",\"type\":\"server_error\","
                            b"\"param\":null,\"code\":null}}\n\n")

    async def test_completions_moderations_images_models(self) -> None:
        _, raw = await self.post("/v1/completions", {"model": "gpt", "prompt": "x y"})
        body = orjson.loads(raw)
        assert body["object"] == "text_completion" and body["usage"]["prompt_tokens"] == 2
        _, raw = await self.post("/v1/moderations", {"model": "m", "input": ["a", "b"]})
        assert len(orjson.loads(raw)["results"]) == 2
        _, raw = await self.post("/v1/images/generations", {"model": "img", "prompt": "a cat",
                                                            "n": 2})
        assert len(orjson.loads(raw)["data"]) == 2
        response = await self.client.request("GET", self.fake.url("/v1/models"), None, None,
                                              first_byte_timeout=5)
        models = orjson.loads(await response.read_all(1 << 20))
        assert [m["id"] for m in models["data"]] == self.fake.models

    async def test_multipart_routes_and_api_key(self) -> None:
        body, ctype = multipart({"model": b"whisper", "file": b"\x00" * 32000})
        code, raw = await self.post("/v1/audio/transcriptions", body, ctype)
        assert code == 200 and orjson.loads(raw)["text"] == "received 32000 bytes"
        assert self.fake.requests[-1].body["model"] == b"whisper"
        body, ctype = multipart({"model": b"img", "prompt": b"edit it", "image": b"1" * 5000})
        code, raw = await self.post("/v1/images/edits", body, ctype)
        assert orjson.loads(raw)["usage"]["input_tokens_details"]["image_tokens"] == 5
        self.fake.api_key = "sk-right"
        code, _ = await self.post("/v1/moderations", {"input": "x"},
                                  headers={b"authorization": [b"Bearer sk-wrong"]})
        assert code == 401
        code, _ = await self.post("/v1/moderations", {"input": "x"},
                                  headers={b"authorization": [b"Bearer sk-right"]})
        assert code == 200


class Hangup(Protocol):
    def connectionMade(self) -> None:
        self.transport.loseConnection()


class SchemeTests(TestCase):
    async def test_failed_tls_handshake_and_unknown_scheme_are_unavailable(self) -> None:
        port = reactor.listenTCP(0, Factory.forProtocol(Hangup), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        number = port.getHost().port
        client = UpstreamClient(reactor)
        self.addCleanup(client.close)
        with self.assertRaises(UpstreamUnavailable):
            await client.request("GET", f"https://127.0.0.1:{number}/v1/models", None, None,
                                 first_byte_timeout=5)
        with self.assertRaises(UpstreamUnavailable):
            await client.request("GET", f"ftp://127.0.0.1:{number}/x", None, None,
                                 first_byte_timeout=5)
