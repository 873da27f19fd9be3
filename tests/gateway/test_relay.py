"""StreamWriter + EventRelay end to end: fake upstream -> a relaying resource -> raw TCP client.

Sockets are real (loopback); heartbeat, first-byte and idle timers run on a Clock.
"""

from __future__ import annotations

import socket
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.channels.http import UpstreamAborted, UpstreamClient, UpstreamResponse
from gateway.channels.relay import BytesRelay, EventRelay, StreamWriter
from gateway.protocols.sse import DONE, PING, SSEEvent, SSEParser, SSETooLarge, encode_event
from tests.gateway.test_upstream_client import wait_for
from tests.support.upstream import FakeUpstream, content_piece, speech_bytes

SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


class RelayResource(Resource):
    """A minimal gateway: GET /<model> streams the fake's chat answer for that model."""

    isLeaf = True

    def __init__(self, test: RelayTests) -> None:
        super().__init__()
        self.test = test
        self.writers: list[StreamWriter] = []
        self.upstreams: list[UpstreamResponse] = []
        self.outcomes: list[Failure | None] = []

    def render_GET(self, request: Any) -> Any:
        test = self.test
        if test.small_send_buffer:
            request.transport.getHandle().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        model = request.path.decode().strip("/")
        writer = None
        if "late-writer" not in model:
            writer = StreamWriter(request, test.clock, heartbeat_interval=15)
            self.writers.append(writer)
        if model == "manual":
            return NOT_DONE_YET
        path = "/v1/audio/speech" if model.startswith("speech") else "/v1/chat/completions"
        body = orjson.dumps({"model": model, "stream": True, "input": "hello",
                             "messages": [{"role": "user", "content": "hi"}]})
        sent = test.client.request("POST", test.fake.url(path),
                                   {b"content-type": [b"application/json"]}, body,
                                   first_byte_timeout=10)
        sent.addCallback(self.relay, request, writer)
        return NOT_DONE_YET

    def relay(self, response: UpstreamResponse, request: Any,
              writer: StreamWriter | None) -> None:
        self.upstreams.append(response)
        if writer is None:  # created only once the upstream answered
            writer = StreamWriter(request, self.test.clock, heartbeat_interval=15)
            self.writers.append(writer)
        if response.code != 200:
            response.abort()
            request.setResponseCode(502)
            request.setHeader(b"content-type", b"application/json")
            request.write(b'{"error": "upstream failed"}')
            request.finish()
            return
        writer.set_response(200, SSE_HEADERS)
        relay: EventRelay | BytesRelay
        if response.header(b"content-type") == b"audio/mpeg":
            relay = BytesRelay(writer, response)
        else:
            model = request.path.decode()
            cap = SSEParser(max_event_bytes=64) if "tiny-cap" in model else None
            on_event = self.exploding if "explode" in model else self.on_event
            relay = EventRelay(writer, response, on_event, parser=cap)
        response.deliver(relay, idle_timeout=60)

        def ended(outcome: Failure | None) -> None:
            self.outcomes.append(outcome)
            if outcome is not None and writer.active:
                writer.write(encode_event(b'{"error": {"message": "upstream broke"}}'))
                writer.write(DONE)
            writer.finish()

        relay.done.addCallbacks(lambda _: ended(None), ended)

    def exploding(self, event: SSEEvent) -> bytes | None:
        if b"tok1" in event.data:
            raise ValueError("translator bug")
        return self.on_event(event)

    def on_event(self, event: SSEEvent) -> bytes | None:
        if event.data == b"[DONE]":
            return DONE
        chunk = orjson.loads(event.data)
        if chunk.get("choices") and chunk["choices"][0]["delta"].get("role"):
            return None  # drop the role chunk: the first forwarded byte is real content
        return encode_event(event.data)


class RawClient(Protocol):
    """Reads the raw HTTP response; can stop reading, or hang up after N content events."""

    def __init__(self, hang_up_after: int | None = None, paused: bool = False) -> None:
        self.data = b""
        self.hang_up_after = hang_up_after
        self.start_paused = paused
        self.closed: Deferred[None] = Deferred()

    def connectionMade(self) -> None:
        if self.start_paused:
            self.transport.pauseProducing()

    def send_get(self, path: str) -> None:
        self.transport.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())

    def dataReceived(self, data: bytes) -> None:
        self.data += data
        if self.hang_up_after is not None and self.contents() >= self.hang_up_after:
            self.hang_up_after = None
            self.transport.abortConnection()

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.closed.callback(None)

    def contents(self) -> int:
        return self.data.count(b'"content":"tok')

    @property
    def head(self) -> bytes:
        return self.data.partition(b"\r\n\r\n")[0]


class RelayTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.small_send_buffer = False
        self.fake = FakeUpstream.start()
        self.addCleanup(self.fake.stop)
        self.client = UpstreamClient(reactor, clock=self.clock)
        self.addCleanup(self.client.close)
        self.resource = RelayResource(self)
        self.port = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)

    async def connect(self, path: str, **kwargs: Any) -> RawClient:
        proto = RawClient(**kwargs)
        connected: Deferred[None] = Deferred()

        class Once(ClientFactory):
            def buildProtocol(self, addr: Any) -> RawClient:
                reactor.callLater(0, connected.callback, None)
                return proto

        reactor.connectTCP("127.0.0.1", self.port.getHost().port, Once())
        await connected
        proto.send_get(path)
        self.addCleanup(lambda: proto.transport.abortConnection())
        return proto

    @property
    def writer(self) -> StreamWriter:
        return self.resource.writers[-1]

    async def test_headers_are_held_until_the_first_write(self) -> None:
        client = await self.connect("/manual")
        await wait_for(lambda: self.resource.writers)
        self.writer.set_response(201, [(b"x-one", b"1")])
        for _ in range(20):
            await Deferred.fromCoroutine(wait_for(lambda: True))
        assert client.data == b"" and not self.writer.started
        self.clock.advance(60)  # no heartbeat before the stream started
        self.writer.write(b"data: hello\n\n")
        assert self.writer.started and self.writer.first_byte_at == self.clock.seconds()
        await wait_for(lambda: b"data: hello" in client.data)
        assert client.head.startswith(b"HTTP/1.1 201 ")
        assert b"x-one: 1" in client.head.lower()
        assert b"transfer-encoding: chunked" in client.head.lower()
        with self.assertRaises(RuntimeError):
            self.writer.set_response(200, [])
        self.writer.finish()
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        assert self.writer.bytes_sent == len(b"data: hello\n\n")

    async def test_not_started_writer_lets_the_caller_answer_normally(self) -> None:
        client = await self.connect("/gpt+fail-503")
        await wait_for(lambda: b"upstream failed" in client.data)
        assert client.head.startswith(b"HTTP/1.1 502 ")
        assert not self.writer.started and self.writer.bytes_sent == 0
        assert not self.writer.active
        self.writer.finish()  # no-op once the request was answered

    async def test_heartbeat_only_on_quiet_streams(self) -> None:
        client = await self.connect("/manual")
        await wait_for(lambda: self.resource.writers)
        self.writer.write(b"data: 1\n\n")
        self.clock.advance(10)
        self.writer.write(b"data: 2\n\n")
        self.clock.advance(10)  # 20 s since start, 10 s since the last write: no ping
        await wait_for(lambda: b"data: 2" in client.data)
        assert PING not in client.data
        self.clock.advance(5)  # 15 s quiet
        await wait_for(lambda: client.data.count(PING) == 1)
        self.clock.advance(15)
        await wait_for(lambda: client.data.count(PING) == 2)
        assert self.writer.bytes_sent == 2 * len(b"data: 1\n\n") + 2 * len(PING)
        self.writer.finish()
        self.clock.advance(60)
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        assert client.data.count(PING) == 2

    async def test_full_stream_is_relayed_and_finished(self) -> None:
        client = await self.connect("/gpt+chunks-10")
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        assert client.contents() == 10
        for i in range(10):
            assert content_piece(i).encode() in client.data
        assert b"data: [DONE]" in client.data
        assert b'"role"' not in client.data
        assert self.resource.outcomes == [None]
        assert self.writer.finished and not self.writer.closed_by_client

    async def test_binary_body_is_relayed_unchanged(self) -> None:
        client = await self.connect("/speech+chunks-4")
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        assert self.writer.bytes_sent == len(speech_bytes("hello"))

    async def test_client_disconnect_aborts_the_upstream_at_once(self) -> None:
        client = await self.connect("/gpt+chunks-100000+pace-0.002", hang_up_after=3)
        await client.closed
        await wait_for(lambda: self.writer.closed_by_client)
        # same reactor turn: the upstream body was already stopped
        assert self.resource.upstreams[-1].finished
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(UpstreamAborted)
        await wait_for(lambda: self.fake.open_connections == 0)
        assert self.fake.streams_cancelled == 1
        assert not self.writer.active

    async def test_failure_after_first_byte_ends_with_one_error_event(self) -> None:
        client = await self.connect("/gpt+chunks-5+drop-after-2")
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        assert client.head.startswith(b"HTTP/1.1 200 ")
        assert client.contents() == 2
        assert client.data.count(b"upstream broke") == 1
        assert client.data.count(b"[DONE]") == 1

    async def test_slow_client_pauses_the_upstream(self) -> None:
        self.small_send_buffer = True
        client = await self.connect("/gpt+chunks-4000", paused=True)
        await wait_for(lambda: self.resource.upstreams
                       and self.resource.upstreams[-1].pause_count >= 1)
        assert self.writer.pause_count >= 1
        upstream = self.resource.upstreams[-1]
        held = self.writer.bytes_sent
        self.clock.advance(120)  # our pause is not an upstream stall: no idle abort
        assert not upstream.finished
        client.transport.resumeProducing()
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"), timeout=10)
        assert client.contents() == 4000
        assert self.writer.bytes_sent > held
        assert self.resource.outcomes == [None]

    async def test_on_event_exception_aborts_upstream_and_ends_the_stream(self) -> None:
        client = await self.connect("/gpt+chunks-5000+pace-0.001+explode")
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(ValueError)
        assert client.contents() == 1
        assert client.data.count(b"upstream broke") == 1
        await wait_for(lambda: self.fake.open_connections == 0)

    async def test_oversized_event_aborts_upstream(self) -> None:
        client = await self.connect("/gpt+chunks-5000+pace-0.001+tiny-cap")
        await wait_for(lambda: client.data.endswith(b"0\r\n\r\n"))
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(SSETooLarge)
        assert client.data.count(b"upstream broke") == 1
        await wait_for(lambda: self.fake.open_connections == 0)

    async def test_client_gone_before_the_writer_exists(self) -> None:
        client = await self.connect("/gpt+slow-first-byte-0.2+late-writer")
        await wait_for(lambda: self.fake.request_count == 1)
        client.transport.loseConnection()
        await client.closed
        await wait_for(lambda: self.resource.writers)
        assert self.writer.closed_by_client and not self.writer.active
        assert self.resource.upstreams[-1].finished
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(UpstreamAborted)
        await wait_for(lambda: self.fake.open_connections == 0)
