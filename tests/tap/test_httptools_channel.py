"""``LockgateChannel`` parses requests with httptools and keeps twisted.web's channel contract.

Real loopback sockets through a real ``LockgateSite`` (and, where every split of a request
into two reads must be tried deterministically, the same site's channel on an in-memory
transport): pipelined requests answered in order (and the client paused past
twisted.web's eager-read size while it waits), bodies split at every byte, chunked bodies
with extensions and trailers, ``Expect: 100-continue``, HTTP/1.0, keep-alive reuse, the
refusals (400, 413, 414, 431; the same after a hand-over to twisted.web's parser), a client
that hangs up mid-body or mid-answer, a WebSocket upgrade (autobahn taking the transport
over, with a frame sent in the same packet as the head) and HEAD.
"""

from __future__ import annotations

import os
import re
import socket
import struct
from typing import Any

from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.testing import StringTransport
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from tap.body_limits import CONSOLE_LIMIT
from tap.http_channel import LockgateChannel, LockgateSite

reactor: Any = global_reactor


class _Recorder(Resource):
    """Answers ``METHOD URI BODY`` at once; ``/slow`` after 50 ms; ``/hold`` never (until
    the client leaves)."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[bytes, bytes, list[tuple[bytes, list[bytes]]], bytes]] = []
        self.finished_order: list[bytes] = []
        self.held: list[Any] = []
        self.gone: Deferred[None] = Deferred()

    def render(self, request: Any) -> Any:
        body = request.content.read()
        self.seen.append((request.method, request.uri,
                          sorted(request.requestHeaders.getAllRawHeaders()), body))
        answer = request.method + b" " + request.uri + b" " + body
        request.setHeader(b"content-type", b"text/plain")
        if request.path == b"/hold":
            self.held.append(request)
            request.notifyFinish().addErrback(lambda _: self.gone.callback(None))
            request.write(b"first part")
            return NOT_DONE_YET
        if request.path == b"/slow":
            def later() -> None:
                request.write(answer)
                self.finished_order.append(request.uri)
                request.finish()
            reactor.callLater(0.05, later)
            return NOT_DONE_YET
        self.finished_order.append(request.uri)
        return answer


class _Echo(WebSocketServerProtocol):
    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.sendMessage(b"echo:" + payload, isBinary)


def _post(path: bytes, body: bytes, *extra: bytes) -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n" + b"".join(e + b"\r\n" for e in extra)
            + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _get(path: bytes, *extra: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    return (b"GET " + path + b" " + version + b"\r\nHost: x\r\n"
            + b"".join(e + b"\r\n" for e in extra) + b"\r\n")


def _chunked(path: bytes, *pieces: bytes, trailer: bytes = b"") -> bytes:
    body = b"".join(b"%x;ext=%d\r\n%s\r\n" % (len(p), n, p) for n, p in enumerate(pieces))
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + body + b"0\r\n" + trailer + b"\r\n")


def _answers(raw: bytes) -> list[tuple[int, bytes, bytes]]:
    """(status, head, body) of each answer in ``raw`` (Content-Length or chunked bodies)."""
    found = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        lines = head.lower().split(b"\r\n")
        length = next((int(line.split(b":")[1]) for line in lines
                       if line.startswith(b"content-length:")), None)
        body = b""
        if status == 100:
            pass
        elif b"transfer-encoding: chunked" in lines:
            while True:
                size_line, _, raw = raw.partition(b"\r\n")
                size = int(size_line, 16)
                body, raw = body + raw[:size], raw[size + 2:]
                if size == 0:
                    break
        elif length is not None:
            body, raw = raw[:length], raw[length:]
        found.append((status, head, body))
    return found


def _exchange(port: int, data: bytes, until: int = 1, timeout: float = 10.0) -> bytes:
    """Send ``data``, read until ``until`` answers are complete or the server closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(data)
        return _read(sock, until)
    finally:
        sock.close()


def _read(sock: socket.socket, until: int) -> bytes:
    received = b""
    while True:
        try:
            if len(_answers(received)) >= until:
                return received
        except (ValueError, IndexError):
            pass
        data = sock.recv(65536)
        if not data:
            return received
        received += data


def _read_to_close(sock: socket.socket) -> bytes:
    received = b""
    while data := sock.recv(65536):
        received += data
    return received


class HttptoolsChannelSocketTests(TestCase):
    def setUp(self) -> None:
        self.resource = _Recorder()
        root = Resource()
        for name in (b"a", b"b", b"c", b"slow", b"hold", b"x", b"big"):
            root.putChild(name, self.resource)
        factory = WebSocketServerFactory()
        factory.protocol = _Echo
        root.putChild(b"ws", WebSocketResource(factory))
        self.site = LockgateSite(root)
        self.port = reactor.listenTCP(0, self.site, interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.number = self.port.getHost().port

    def tearDown(self) -> Any:
        for request in self.resource.held:
            if not request.finished and request.channel is not None:
                request.finish()
        return deferLater(reactor, 0.05, lambda: None)

    async def send(self, data: bytes, until: int = 1) -> list[tuple[int, bytes, bytes]]:
        return _answers(await deferToThread(_exchange, self.number, data, until))

    async def test_pipelined_requests_are_answered_in_order(self) -> None:
        # the first is answered 50 ms later: the second and third wait for it
        answers = await self.send(_post(b"/slow", b"one") + _get(b"/b?q=2")
                                  + _post(b"/c", b"three"), until=3)
        assert [body for _, _, body in answers] == [
            b"POST /slow one", b"GET /b?q=2 ", b"POST /c three"], answers
        assert self.resource.finished_order == [b"/slow", b"/b?q=2", b"/c"]

    async def test_keep_alive_connection_serves_requests_one_after_another(self) -> None:
        def run() -> list[bytes]:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            bodies = []
            try:
                for n in range(5):
                    sock.sendall(_post(b"/a", b"n=%d" % n))
                    bodies.append(_answers(_read(sock, 1))[0][2])
            finally:
                sock.close()
            return bodies
        bodies = await deferToThread(run)
        assert bodies == [b"POST /a n=%d" % n for n in range(5)]
        channels = {id(p) for p in self._server_protocols()}
        assert len(channels) <= 1  # one connection served all five

    async def test_chunked_body_with_extensions_and_trailer(self) -> None:
        [(status, _, body)] = await self.send(
            _chunked(b"/a", b"hello ", b"chunked ", b"world", trailer=b"X-Trailer: t\r\n"))
        assert status == 200 and body == b"POST /a hello chunked world"
        headers = dict(self.resource.seen[0][2])
        assert b"X-Trailer" not in headers and headers[b"Transfer-Encoding"] == [b"chunked"]

    async def test_headers_reach_the_request_as_twisted_web_gives_them(self) -> None:
        await self.send(_get(b"/a", b"x-dup: one", b"X-DUP:two", b"content-TYPE:  a/b \t",
                             b"Authorization: Bearer k"))
        headers = dict(self.resource.seen[0][2])
        assert headers[b"X-Dup"] == [b"one", b"two"]
        assert headers[b"Content-Type"] == [b"a/b"]
        assert headers[b"Authorization"] == [b"Bearer k"]
        assert headers[b"Host"] == [b"x"]

    async def test_expect_100_continue_is_answered_before_the_body(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                sock.sendall(b"POST /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                             b"Content-Length: 4\r\n\r\n")
                interim = sock.recv(65536)
                assert interim == b"HTTP/1.1 100 Continue\r\n\r\n", interim
                sock.sendall(b"body")
                return _read(sock, 1)
            finally:
                sock.close()
        [(status, _, body)] = _answers(await deferToThread(run))
        assert status == 200 and body == b"POST /a body"

    async def test_http_1_0_is_answered_and_closed(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                # a second request after an HTTP/1.0 one is dropped, as twisted.web does
                sock.sendall(_get(b"/a", version=b"HTTP/1.0") + _get(b"/b"))
                return _read_to_close(sock)
            finally:
                sock.close()
        raw = await deferToThread(run)
        assert raw.startswith(b"HTTP/1.0 200 OK\r\n"), raw
        assert raw.endswith(b"GET /a "), raw
        assert [seen[1] for seen in self.resource.seen] == [b"/a"]

    async def test_connection_close_closes_after_the_answer(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                sock.sendall(_get(b"/a", b"Connection: close") + _get(b"/b"))
                return _read_to_close(sock)
            finally:
                sock.close()
        [(status, head, body)] = _answers(await deferToThread(run))
        assert status == 200 and b"\r\nConnection: close" in head and body == b"GET /a "

    async def test_head_answers_headers_only_and_keeps_the_connection(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                sock.sendall(b"HEAD /a HTTP/1.1\r\nHost: x\r\n\r\n")
                first = sock.recv(65536)
                sock.sendall(_get(b"/b"))
                return first + b"|" + _read(sock, 1)
            finally:
                sock.close()
        head_answer, _, second = (await deferToThread(run)).partition(b"|")
        assert head_answer.startswith(b"HTTP/1.1 200 OK") and head_answer.endswith(b"\r\n\r\n")
        assert b"Content-Length: 8\r\n" in head_answer, head_answer
        assert _answers(second)[0][2] == b"GET /b "

    async def test_malformed_request_answered_400_and_closed(self) -> None:
        for bad in (b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
                    b"GET /\x00 HTTP/1.1\r\n\r\n",
                    b"POST /a HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                    b"POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            raw = await deferToThread(self._send_and_read_to_close, bad)
            assert raw == b"HTTP/1.1 400 Bad Request\r\n\r\n", (bad, raw)
        assert self.resource.seen == []

    async def test_heads_only_twisted_web_accepts_are_still_served(self) -> None:
        # llhttp refuses these; twisted.web took them, and still does for this connection
        for head, uri in ((b"GET /b HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n", b"/b"),
                          (b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n"
                           b"Content-Length: 2\r\n\r\nok", b"/c")):
            answers = await self.send(head + _get(b"/x?after"), until=2)
            assert [status for status, _, _ in answers] == [200, 200], (head, answers)
            assert answers[0][2].split(b" ")[1] == uri, answers
        folded = dict(self.resource.seen[0][2])
        assert folded[b"X-Folded"] == [b"a b"]
        # a raw non-ASCII target: twisted.web's own 400, as before
        raw = await deferToThread(self._send_and_read_to_close,
                                  b"GET /a?q=caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert raw == b"HTTP/1.1 400 Bad Request\r\n\r\n"

    async def test_refusals_keep_their_exact_answers(self) -> None:
        long_target = await self.send(_get(b"/a?q=" + b"x" * 17000))
        assert long_target[0][0] == 414
        too_large = await self.send(_get(b"/a", b"X-Big: " + b"y" * 16400))
        assert too_large[0][0] == 431
        too_many = await self.send(_get(b"/a", *[b"X-F%d: y" % n for n in range(101)]))
        assert too_many[0][0] == 431 and b"Too many request headers" in too_many[0][2]
        hundred = await self.send(_get(b"/a", *[b"X-F%d: y" % n for n in range(99)]))
        assert hundred[0][0] == 200  # Host plus 99: exactly the cap
        declared = await self.send(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                                   b"Content-Length: 999999999999\r\n\r\n")
        assert declared[0][0] == 413 and b"body_too_large" in declared[0][2]
        assert b"Connection: close" in declared[0][1]
        assert [seen[1] for seen in self.resource.seen] == [b"/a"]  # only the one at the cap

    async def test_twisted_webs_parser_refuses_as_llhttps_path_does(self) -> None:
        # a folded header line hands the connection to twisted.web's parser
        # (tap.parser_handover): the requests after it meet the same limits and answers
        folded = b"GET /b HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n"
        cases = (
            (_get(b"/a?q=" + b"x" * 17000), 414, b"Request target is too long"),
            (_get(b"/a", b"X-Big: " + b"y" * 16400), 431, b"Request headers are too large"),
            (_get(b"/a", *[b"X-F%d: y" % n for n in range(101)]), 431,
             b"Too many request headers"),
            (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
             b"Content-Length: 999999999999\r\n\r\n", 413, b"body_too_large"),
        )
        for bad, status, said in cases:
            answers = await self.send(folded + bad, until=2)
            assert [answer[0] for answer in answers] == [200, status], (status, answers)
            assert said in answers[1][2] and b"Connection: close" in answers[1][1], answers
        hundred = await self.send(folded + _get(b"/a", *[b"X-F%d: y" % n for n in range(99)]),
                                  until=2)
        assert [answer[0] for answer in hundred] == [200, 200]  # Host plus 99: the cap
        assert [seen[1] for seen in self.resource.seen] == [b"/b"] * 5 + [b"/a"]

    async def test_a_head_sent_byte_by_byte_past_the_limit_is_refused(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                sock.sendall(b"GET /a HTTP/1.1\r\nX-Long: ")
                try:
                    for _ in range(40):
                        sock.sendall(b"z" * 1024)
                except OSError:
                    pass
                return _read_to_close(sock)
            finally:
                sock.close()
        [(status, _, _)] = _answers(await deferToThread(run))
        assert status == 431

    async def test_chunked_body_over_the_cap_refused_413(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                sock.sendall(b"POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                piece = b"x" * 65536
                try:
                    for _ in range(CONSOLE_LIMIT // len(piece) + 4):
                        sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                except OSError:
                    pass
                return _read_to_close(sock)
            finally:
                sock.close()
        [(status, _, body)] = _answers(await deferToThread(run))
        assert status == 413 and str(CONSOLE_LIMIT).encode() in body
        assert self.resource.seen == []

    async def test_client_hanging_up_mid_body_dispatches_nothing(self) -> None:
        def run() -> None:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            sock.sendall(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
            sock.close()
        await deferToThread(run)
        await deferLater(reactor, 0.1, lambda: None)
        assert self.resource.seen == []
        answers = await self.send(_get(b"/a"))  # and the server still serves
        assert answers[0][0] == 200

    async def test_client_hanging_up_mid_answer_ends_the_request(self) -> None:
        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            sock.sendall(_get(b"/hold"))
            first = sock.recv(65536)
            sock.close()
            return first
        first = await deferToThread(run)
        assert b"first part" in first
        await self.resource.gone  # notifyFinish failed: the request saw the hang-up
        assert self.resource.held[0].channel is None or self.resource.held[0]._disconnected

    async def test_websocket_upgrade_hands_the_connection_and_early_bytes_over(self) -> None:
        key = b"dGhlIHNhbXBsZSBub25jZQ=="
        head = (b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")

        def run() -> bytes:
            sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
            try:
                # the first frame travels in the same packet as the head
                sock.sendall(head + _masked_text_frame(b"hi"))
                received = b""
                while b"echo:hi" not in received:
                    data = sock.recv(65536)
                    if not data:
                        break
                    received += data
                return received
            finally:
                sock.close()
        received = await deferToThread(run)
        assert received.startswith(b"HTTP/1.1 101 Switching Protocols\r\n"), received
        assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in received
        assert received.endswith(b"\x81\x07echo:hi"), received

    async def test_upgrade_header_on_a_plain_request_with_a_body_is_plain_http(self) -> None:
        # e.g. curl's h2c offer: twisted.web ignores Upgrade, and so does the channel
        answers = await self.send(
            _post(b"/a", b"payload", b"Connection: Upgrade, HTTP2-Settings",
                  b"Upgrade: h2c", b"HTTP2-Settings: AAMAAABkAAQAAP__")
            + _post(b"/b", b"second"), until=2)
        assert [body for _, _, body in answers] == [b"POST /a payload", b"POST /b second"]

    def _send_and_read_to_close(self, data: bytes) -> bytes:
        sock = socket.create_connection(("127.0.0.1", self.number), timeout=10)
        try:
            sock.sendall(data)
            return _read_to_close(sock)
        finally:
            sock.close()

    def _server_protocols(self) -> list[Any]:
        return [s.protocol for s in reactor.getReaders()
                if isinstance(getattr(s, "protocol", None), LockgateChannel)]


def _masked_text_frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return struct.pack("!BB", 0x81, 0x80 | len(payload)) + mask + masked


class HttptoolsChannelSplitTests(TestCase):
    """Every split of a request into two reads gives the same answer (in-memory transport:
    a socket may merge the two writes)."""

    def setUp(self) -> None:
        self.resource = _Recorder()
        root = Resource()
        root.putChild(b"a", self.resource)
        self.site = LockgateSite(root)

    def answer_of(self, pieces: list[bytes]) -> bytes:
        channel = self.site.buildProtocol(None)
        transport = StringTransport()
        channel.makeConnection(transport)
        try:
            for piece in pieces:
                channel.dataReceived(piece)
            # the Date header may cross a second between two runs
            return re.sub(rb"\r\nDate: [^\r]*", b"", transport.value())
        finally:
            channel.connectionLost(None)

    def test_a_body_split_at_every_byte(self) -> None:
        for request in (_post(b"/a", b'{"model": "m", "x": 1}', b"Content-Type: a/json"),
                        _chunked(b"/a", b"ab", b"cdef", trailer=b"T: 1\r\n")):
            whole = self.answer_of([request + _get(b"/a?next")])
            assert len(_answers(whole)) == 2, whole
            for cut in range(1, len(request)):
                split = self.answer_of([request[:cut], request[cut:] + _get(b"/a?next")])
                assert split == whole, (cut, split)

    def test_a_request_fed_one_byte_at_a_time(self) -> None:
        request = _chunked(b"/a", b"hello", b"world") + _post(b"/a", b"x=1")
        one_by_one = self.answer_of([request[n:n + 1] for n in range(len(request))])
        assert [body for _, _, body in _answers(one_by_one)] == [
            b"POST /a helloworld", b"POST /a x=1"]


class PipelinedBackpressureTests(TestCase):
    """A client pipelining requests behind one still being answered is paused once more than
    ``_optimisticEagerReadSize`` bytes wait (as twisted.web pauses it), whether llhttp parsed
    them already (queued steps) or they arrived later (held unparsed); it is resumed when the
    answer is done, and what it sent is then served in order."""

    def setUp(self) -> None:
        self.resource = _Recorder()
        root = Resource()
        root.putChild(b"a", self.resource)
        root.putChild(b"hold", self.resource)
        self.site = LockgateSite(root)

    def connect(self) -> tuple[Any, StringTransport]:
        channel = self.site.buildProtocol(None)
        transport = StringTransport()
        channel.makeConnection(transport)
        self.addCleanup(channel.connectionLost, None)
        return channel, transport

    def answers_after_the_held_one(self, channel: Any, transport: StringTransport,
                                   paused: bool) -> list[tuple[int, bytes, bytes]]:
        assert transport.producerState == ("paused" if paused else "producing")
        channel.requests[0].finish()
        assert transport.producerState == "producing"
        return _answers(transport.value())

    def test_bytes_parsed_ahead_past_the_limit_pause_the_client(self) -> None:
        # one read: llhttp parses the pipelined requests into queued steps
        for body, paused in ((b"x" * 100, False), (b"x" * 20000, True)):
            channel, transport = self.connect()
            channel.dataReceived(_get(b"/hold") + _post(b"/a", b"small") + _post(b"/a", body))
            answers = self.answers_after_the_held_one(channel, transport, paused)
            assert [answer[2] for answer in answers[1:]] == [b"POST /a small", b"POST /a " + body]

    def test_bytes_held_unparsed_past_the_limit_pause_the_client(self) -> None:
        # later reads: kept unparsed in _dataBuffer until the answer is done
        for bodies, paused in (((b"y" * 10000,), False), ((b"y" * 10000, b"z" * 10000), True)):
            channel, transport = self.connect()
            channel.dataReceived(_get(b"/hold"))
            for body in bodies:
                channel.dataReceived(_post(b"/a", body))
            answers = self.answers_after_the_held_one(channel, transport, paused)
            assert [answer[2] for answer in answers[1:]] == [b"POST /a " + b for b in bodies]
