"""The lean upstream client hands over a read's body pieces at once (issue 22, goal 4).

Several HTTP chunks that arrive in one socket read reach the body sink in one call, joined;
pieces that waited for ``deliver`` arrive in one call too; a body split anywhere across reads
is delivered exactly; a second answer inside the read that completed the first is refused.
Real loopback servers (``tests.gateway.test_lean_http``) decide the write boundaries.
"""

from __future__ import annotations

import random
from typing import Any

from twisted.internet import reactor
from twisted.internet.task import deferLater
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase

from gateway.channels.http import UpstreamClient, UpstreamUnavailable
from tests.gateway.test_lean_http import RawServer, RawServerProtocol, ok
from tests.support.waiting import wait_for

CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class Calls:
    """A body sink that keeps each ``data_received`` call apart."""

    def __init__(self) -> None:
        self.calls: list[bytes] = []
        self.reason: Failure | None = None
        self.finished = False

    def data_received(self, data: bytes) -> None:
        self.calls.append(data)

    def body_finished(self, reason: Failure | None) -> None:
        assert not self.finished
        self.finished = True
        self.reason = reason


class LeanBatchTests(TestCase):
    def serve(self, handler: Any) -> tuple[RawServer, UpstreamClient, str]:
        server = RawServer(handler)
        port = reactor.listenTCP(0, server, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = UpstreamClient(reactor)
        self.addCleanup(client.close)
        self.addCleanup(self.close_all, server)
        return server, client, f"http://127.0.0.1:{port.getHost().port}"

    async def close_all(self, server: RawServer) -> None:
        for conn in server.connections:
            if not conn.closed:
                conn.transport.abortConnection()
        await wait_for(lambda: server.open_connections == 0)

    async def test_the_chunks_of_one_read_reach_the_sink_in_one_call(self) -> None:
        protos: list[RawServerProtocol] = []

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            protos.append(proto)
            proto.transport.write(CHUNKED_HEAD + chunk(b"a") + chunk(b"b"))

        server, client, url = self.serve(handle)
        response = await client.request("GET", url + "/s", None, None, first_byte_timeout=5)
        # read after the answer was handed over, before deliver: waits, then one call too
        protos[0].transport.write(chunk(b"c") + chunk(b"d"))
        await deferLater(reactor, 0.05, lambda: None)
        sink = Calls()
        response.deliver(sink, idle_timeout=30)
        assert sink.calls == [b"abcd"]
        protos[0].transport.write(chunk(b"e") + chunk(b"f") + chunk(b"g"))
        await wait_for(lambda: len(sink.calls) == 2)
        assert sink.calls == [b"abcd", b"efg"]
        protos[0].transport.write(chunk(b"h") + chunk(b"i") + b"0\r\n\r\n")
        await wait_for(lambda: sink.finished)
        assert sink.calls == [b"abcd", b"efg", b"hi"] and sink.reason is None
        # the answer ended cleanly: its connection serves the next request
        response2 = await client.request("GET", url + "/t", None, None, first_byte_timeout=5)
        protos[1].transport.write(chunk(b"z") + b"0\r\n\r\n")
        assert await response2.read_all(100) == b"abz"
        assert len(server.connections) == 1

    async def test_a_body_split_anywhere_across_reads_is_delivered_exactly(self) -> None:
        """Random chunk sizes, the wire split at random offsets (inside chunk-size lines, CRLFs
        and data), each piece its own ``send`` 1 ms apart: the body, pooled reuse, no empty
        call, for 20 seeds on one connection."""
        answers: dict[bytes, tuple[bytes, list[bytes]]] = {}
        for seed in range(20):
            rng = random.Random(seed)
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
            wire, at = CHUNKED_HEAD, 0
            while at < len(body):
                size = rng.randrange(1, 300)
                wire += chunk(body[at:at + size])
                at += size
            wire += b"0\r\n\r\n"
            cuts = sorted(rng.sample(range(1, len(wire)), rng.randrange(1, 40)))
            pieces = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]
            answers[b"/%d" % seed] = (body, pieces)

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.setTcpNoDelay(True)
            pieces = answers[path][1]

            def send(i: int) -> None:
                if i < len(pieces) and not proto.closed:
                    proto.transport.write(pieces[i])
                    reactor.callLater(0.001, send, i + 1)
            send(0)

        server, client, url = self.serve(handle)
        for path, (body, _pieces) in answers.items():
            response = await client.request("GET", url + path.decode(), None, None,
                                            first_byte_timeout=5)
            sink = Calls()
            response.deliver(sink, idle_timeout=30)
            await wait_for(lambda sink=sink: sink.finished)  # type: ignore[misc]
            assert sink.reason is None
            assert b"".join(sink.calls) == body
            assert all(sink.calls)
        assert len(server.connections) == 1

    async def test_a_second_answer_in_the_read_of_the_first_is_refused(self) -> None:
        """One request, two answers in one read: the connection is out of step with its
        requests, so the request fails (as for any malformed answer) rather than being handed
        either answer, and the connection is closed."""
        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.write(ok(b"one") + ok(b"two") if path == b"/two" else ok())

        server, client, url = self.serve(handle)
        with self.assertRaises(UpstreamUnavailable):
            await client.request("GET", url + "/two", None, None, first_byte_timeout=5)
        await wait_for(lambda: server.open_connections == 0)
        response = await client.request("GET", url + "/next", None, None, first_byte_timeout=5)
        assert await response.read_all(100) == b"hello"
        assert len(server.connections) == 2
