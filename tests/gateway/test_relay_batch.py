"""The SSE relay writes what one upstream read completed in one write (issue 22, goal 4).

``EventRelay`` gets every body piece of a read at once from the lean client: each event still
goes through ``on_event`` on its own, their output leaves in one ``write`` (one HTTP chunk, one
``send()``), the client's bytes are the same however the upstream's bytes were split across
reads, and a fault in the middle of a batch (an oversized line, a translator error) still
relays the whole events before it.  Upstreams are raw loopback servers that decide the write
boundaries; the client reads the raw chunked answer.  ``BatchedStreamBillingTests`` runs the
product path (``/v1/chat/completions``, the passthrough translator, settlement) both ways.
"""

from __future__ import annotations

import random
import socket
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.protocol import ClientFactory, Protocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.channels.http import UpstreamClient, UpstreamResponse
from gateway.channels.relay import EventRelay, StreamWriter
from gateway.protocols.sse import SSEEvent, SSEParser, SSETooLarge, encode_event
from gateway.store import schema
from tests.gateway.gateway_case import GatewayTestCase, expected_cost_nanos
from tests.gateway.test_lean_batch import CHUNKED_HEAD, chunk
from tests.gateway.test_lean_http import RawServer, RawServerProtocol
from tests.support.waiting import wait_for

ERROR_EVENT = encode_event(b'{"error": {"message": "upstream broke"}}')


def parse_chunked(data: bytes) -> tuple[bytes, list[bytes], bool]:
    """A raw chunked HTTP answer: its head, its body chunks so far, whether it ended."""
    head, _, rest = data.partition(b"\r\n\r\n")
    chunks: list[bytes] = []
    while True:
        size_line, crlf, after = rest.partition(b"\r\n")
        if not crlf:
            return head, chunks, False
        size = int(size_line, 16)
        if size == 0:
            return head, chunks, after.startswith(b"\r\n")
        if len(after) < size + 2:
            return head, chunks, False
        chunks.append(after[:size])
        rest = after[size + 2:]


def same(event: SSEEvent) -> bytes:
    """What the test relay sends on for an event: the event, re-encoded."""
    return encode_event(event.data, event.event)


class Relaying(Resource):
    """GET /<name> relays the raw upstream's /<name> through ``EventRelay`` + ``StreamWriter``;
    a failed relay ends with one error event."""

    isLeaf = True

    def __init__(self, client: UpstreamClient, upstream: str, clock: Clock) -> None:
        super().__init__()
        self.client = client
        self.upstream = upstream
        self.clock = clock
        self.relays: list[EventRelay] = []
        self.outcomes: list[Failure | None] = []
        #: the event data that makes ``on_event`` raise
        self.explode_on = b"explode"

    def render_GET(self, request: Any) -> Any:
        writer = StreamWriter(request, self.clock, heartbeat_interval=None)
        sent = self.client.request("GET", self.upstream + request.path.decode(), None, None,
                                   first_byte_timeout=10)
        sent.addCallback(self.relay, request, writer)
        return NOT_DONE_YET

    def on_event(self, event: SSEEvent) -> bytes:
        if event.data == self.explode_on:
            raise ValueError("translator bug")
        return same(event)

    def relay(self, response: UpstreamResponse, request: Any, writer: StreamWriter) -> None:
        writer.set_response(200, [(b"content-type", b"text/event-stream")])
        capped = b"capped" in request.path
        relay = EventRelay(writer, response, self.on_event,
                           parser=SSEParser(max_event_bytes=64) if capped else None)
        self.relays.append(relay)
        response.deliver(relay, idle_timeout=60)

        def ended(outcome: Failure | None) -> None:
            self.outcomes.append(outcome)
            if outcome is not None:
                writer.write(ERROR_EVENT)
            writer.finish()

        relay.done.addCallbacks(lambda _: ended(None), ended)


class RawClient(Protocol):
    def __init__(self) -> None:
        self.data = b""

    def dataReceived(self, data: bytes) -> None:
        self.data += data

    @property
    def chunks(self) -> list[bytes]:
        return parse_chunked(self.data)[1]

    @property
    def ended(self) -> bool:
        return parse_chunked(self.data)[2]


#: (event name, data) -> wire forms the fuzz picks from: LF, CRLF and bare CR endings, a
#: comment first, an ``id``, no space after the colon, multi-line data
def _wire_forms(name: str | None, data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    lf = head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return [lf, lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r"),
            b": keep-alive\n" + lf, b"id: 7\n" + lf,
            head + b"".join(b"data:" + line + b"\n" for line in lines) + b"\n"]


def _fuzz_stream(seed: int) -> tuple[bytes, bytes, int, list[bytes]]:
    """Seeded: the upstream's wire answer (chunked at random sizes, split at random offsets
    into pieces), the bytes the client must get, and how many events."""
    rng = random.Random(seed)
    body, expected, count = b"", b"", 0
    for i in range(rng.randrange(1, 25)):
        name = rng.choice([None, None, "delta", "ping"])
        data = orjson.dumps({"i": i, "text": "x" * rng.randrange(0, 60)})
        if rng.random() < 0.2:
            data += b"\nsecond line"
        forms = _wire_forms(name, data)
        # a bare-CR form may not be followed by an LF-first form (CR LF would be one ending)
        body += rng.choice(forms[:2] + forms[3:]) if body.endswith(b"\r") else rng.choice(forms)
        expected += encode_event(data, name)
        count += 1
    wire, at = CHUNKED_HEAD, 0
    while at < len(body):
        size = rng.randrange(1, 200)
        wire += chunk(body[at:at + size])
        at += size
    wire += b"0\r\n\r\n"
    cuts = sorted(rng.sample(range(1, len(wire)), min(len(wire) - 1, rng.randrange(1, 30))))
    pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
    return body, expected, count, pieces


def events(*datas: bytes) -> list[bytes]:
    return [b"data: " + d + b"\n\n" for d in datas]


class RelayBatchTests(TestCase):
    def setUp(self) -> None:
        self.protos: list[RawServerProtocol] = []
        self.answers: dict[bytes, list[bytes]] = {}
        self.upstream = RawServer(self.answer)
        up = reactor.listenTCP(0, self.upstream, interface="127.0.0.1")
        self.addCleanup(up.stopListening)
        self.client = UpstreamClient(reactor)
        self.addCleanup(self.client.close)
        self.resource = Relaying(self.client, f"http://127.0.0.1:{up.getHost().port}", Clock())
        self.port = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.addCleanup(self.close_upstream)

    async def close_upstream(self) -> None:
        for conn in self.upstream.connections:
            if not conn.closed:
                conn.transport.abortConnection()
        await wait_for(lambda: self.upstream.open_connections == 0)

    def answer(self, proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
        """Writes the pieces planned for ``path`` 1 ms apart, each its own segment."""
        self.protos.append(proto)
        proto.transport.setTcpNoDelay(True)
        pieces = self.answers.get(path, [])

        def send(i: int) -> None:
            if i < len(pieces) and not proto.closed:
                proto.transport.write(pieces[i])
                reactor.callLater(0.001, send, i + 1)
        send(0)

    async def get(self, path: str) -> RawClient:
        proto = RawClient()
        connected: Deferred[None] = Deferred()

        class Once(ClientFactory):
            def buildProtocol(self, addr: Any) -> RawClient:
                reactor.callLater(0, connected.callback, None)
                return proto

        reactor.connectTCP("127.0.0.1", self.port.getHost().port, Once())
        await connected
        proto.transport.write(f"GET {path} HTTP/1.1\r\nHost: test\r\n\r\n".encode())
        self.addCleanup(lambda: proto.transport.abortConnection())
        return proto

    async def test_the_events_of_one_read_leave_in_one_write(self) -> None:
        first = events(b"1", b"2", b"3")
        second = events(b"4", b"5", b"6", b"7")
        # head and three events (one HTTP chunk each) in one write, so in one read
        self.answers[b"/batches"] = [CHUNKED_HEAD + b"".join(chunk(e) for e in first)]
        client = await self.get("/batches")
        await wait_for(lambda: client.chunks)
        assert client.chunks == [b"".join(first)]
        self.protos[0].transport.write(b"".join(chunk(e) for e in second))
        await wait_for(lambda: len(client.chunks) == 2)
        assert client.chunks == [b"".join(first), b"".join(second)]
        self.protos[0].transport.write(b"0\r\n\r\n")
        await wait_for(lambda: client.ended)
        assert client.chunks == [b"".join(first), b"".join(second)]
        assert self.resource.outcomes == [None]
        assert self.resource.relays[0].events == 7

    async def test_a_stream_split_anywhere_across_reads_reaches_the_client_exactly(self) -> None:
        """20 seeded streams: LF / CRLF / CR line endings, comments, ids, multi-line data,
        HTTP chunks of random sizes, the wire cut at random offsets, each piece a read."""
        for seed in range(20):
            _body, expected, count, pieces = _fuzz_stream(seed)
            path = f"/fuzz-{seed}"
            self.answers[path.encode()] = pieces
            client = await self.get(path)
            await wait_for(lambda client=client: client.ended)  # type: ignore[misc]
            assert b"".join(client.chunks) == expected, seed
            assert self.resource.relays[-1].events == count
            assert self.resource.outcomes[-1] is None
        assert len(self.upstream.connections) == 1  # every answer ended cleanly: pooled

    async def test_whole_events_before_an_oversized_line_in_the_same_read_are_relayed(
            self) -> None:
        good = events(b"1", b"2")
        # one HTTP chunk: two whole events, then a line past the parser's 64-byte cap
        self.answers[b"/capped"] = [CHUNKED_HEAD + chunk(b"".join(good) + b"data: " + b"x" * 99)]
        client = await self.get("/capped")
        await wait_for(lambda: client.ended)
        assert b"".join(client.chunks) == b"".join(good) + ERROR_EVENT
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(SSETooLarge)
        await wait_for(lambda: self.upstream.open_connections == 0)

    async def test_a_translator_error_mid_batch_writes_the_events_before_it_then_fails(
            self) -> None:
        batch = events(b"1", b"2", b"explode", b"4", b"5")
        self.answers[b"/explode"] = [CHUNKED_HEAD + b"".join(chunk(e) for e in batch)]
        client = await self.get("/explode")
        await wait_for(lambda: client.ended)
        assert client.chunks == [b"".join(batch[:2]), ERROR_EVENT]
        outcome = self.resource.outcomes[-1]
        assert outcome is not None and outcome.check(ValueError)
        await wait_for(lambda: self.upstream.open_connections == 0)


def _chat_chunk(**fields: Any) -> bytes:
    payload = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-fake",
               **fields}
    return b"data: " + orjson.dumps(payload) + b"\n\n"


#: a whole chat stream: role, six pieces of text, finish, the usage chunk, the end marker
CHAT_FRAMES = [
    _chat_chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                          "finish_reason": None}]),
    *[_chat_chunk(choices=[{"index": 0, "delta": {"content": f"part{i} "},
                            "finish_reason": None}]) for i in range(6)],
    _chat_chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}]),
    _chat_chunk(choices=[], usage={"prompt_tokens": 7, "completion_tokens": 13,
                                   "total_tokens": 20}),
    b"data: [DONE]\n\n",
]


def _chunked_stream(port: int, key: str) -> tuple[list[bytes], bool]:
    """A streamed chat call on a raw socket (in a thread): the answer's body chunks, ended?"""
    body = orjson.dumps({"model": "gpt-fake", "stream": True,
                         "stream_options": {"include_usage": True},
                         "messages": [{"role": "user", "content": "one two three"}]})
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Authorization: Bearer " + key.encode() + b"\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\n\r\n" + body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while not parse_chunked(data)[2]:
            got = sock.recv(65536)
            if not got:
                break
            data += got
    head, chunks, ended = parse_chunked(data)
    assert head.startswith(b"HTTP/1.1 200 "), head
    return chunks, ended


class BatchedStreamBillingTests(GatewayTestCase):
    """The product path: the same upstream stream in one read and in one read per event gives
    the client the same bytes (one write against one per event) and bills the same usage."""

    def setUp(self) -> None:
        super().setUp()
        self.addCleanup(lambda: ensureDeferred(self.verify_ledger()))

    async def test_one_read_or_one_read_per_event_same_bytes_same_bill(self) -> None:
        await self.provision()
        mode: list[str] = []

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.setTcpNoDelay(True)
            wire = [CHUNKED_HEAD, *(chunk(frame) for frame in CHAT_FRAMES), b"0\r\n\r\n"]
            if mode[-1] == "one read":
                proto.transport.write(b"".join(wire))
                return

            def send(i: int) -> None:
                if i < len(wire) and not proto.closed:
                    proto.transport.write(wire[i])
                    reactor.callLater(0.02, send, i + 1)
            send(0)

        upstream = RawServer(handle)
        port = reactor.listenTCP(0, upstream, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        await self.catalog.set(schema.channels, self.channel_id,
                               base_url=f"http://127.0.0.1:{port.getHost().port}")
        await self.catalog.announce()
        answers = {}
        for name in ("one read", "one read per event"):
            mode.append(name)
            answers[name] = await self.in_thread(_chunked_stream, self.port.getHost().port,
                                                 self.api_key)
        one, one_ended = answers["one read"]
        split, split_ended = answers["one read per event"]
        assert one_ended and split_ended
        assert b"".join(one) == b"".join(split)
        assert b"".join(one).count(b"part") == 6 and b"".join(one).endswith(b"data: [DONE]\n\n")
        assert len(one) == 1  # the whole stream in one write
        assert len(split) == len(CHAT_FRAMES)  # one write per event that arrived alone
        rows = await self.usage_rows()
        assert [(r["status"], r["input_tokens"], r["output_tokens"]) for r in rows] == [
            (0, 7, 13), (0, 7, 13)]
        assert [r["cost_nanos"] for r in rows] == [expected_cost_nanos(7, 13)] * 2
        assert await self.ledger_sum(self.user_id) == -2 * expected_cost_nanos(7, 13)
        for conn in upstream.connections:
            if not conn.closed:
                conn.transport.abortConnection()
        await wait_for(lambda: upstream.open_connections == 0)

