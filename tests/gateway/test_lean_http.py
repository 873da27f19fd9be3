"""The lean upstream HTTP/1.1 client (``gateway.channels.lean_pool`` and its modules, under
``UpstreamClient``) against raw loopback servers written here: framing, pooling, retries,
backpressure, TLS."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor, ssl
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock, deferLater
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.client import BrowserLikePolicyForHTTPS

from gateway.channels.http import (
    BodyTooLarge,
    UpstreamAborted,
    UpstreamBodyFailed,
    UpstreamClient,
    UpstreamResponse,
    UpstreamUnavailable,
)
from tests.support.redis_server import make_certificates
from tests.support.waiting import wait_for

Handler = Callable[["RawServerProtocol", bytes, bytes, bytes], None]


class RawServerProtocol(Protocol):
    """Reads requests (head + Content-Length body) and hands each to the test's handler."""

    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.buffer = b""
        self.closed = False

    def connectionMade(self) -> None:
        self.server.connections.append(self)

    def dataReceived(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, rest = self.buffer.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(rest) < length:
                return
            body, self.buffer = rest[:length], rest[length:]
            method, path, _ = head.split(b"\r\n", 1)[0].split(b" ")
            self.server.requests.append((method, path, body))
            self.server.heads.append(head)
            self.server.handler(self, method, path, body)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.closed = True


class RawServer(Factory):
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections: list[RawServerProtocol] = []
        self.requests: list[tuple[bytes, bytes, bytes]] = []
        self.heads: list[bytes] = []

    def buildProtocol(self, addr: Any) -> RawServerProtocol:
        return RawServerProtocol(self)

    @property
    def open_connections(self) -> int:
        return sum(not c.closed for c in self.connections)


def ok(text: bytes = b"hello") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s" % (
        len(text), text)


def reply(answer: bytes) -> Handler:
    def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
        proto.transport.write(answer)
    return handle


class Collected:
    """A body sink that keeps everything and the end reason."""

    def __init__(self) -> None:
        self.data = b""
        self.reason: Failure | None = None
        self.finished = False

    def data_received(self, data: bytes) -> None:
        self.data += data

    def body_finished(self, reason: Failure | None) -> None:
        assert not self.finished
        self.finished = True
        self.reason = reason


class LeanClientTests(TestCase):
    def serve(self, handler: Handler, *, clock: Any = None, **client_options: Any
              ) -> tuple[RawServer, UpstreamClient, str]:
        server = RawServer(handler)
        port = reactor.listenTCP(0, server, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = UpstreamClient(reactor, clock=clock, **client_options)
        self.addCleanup(client.close)
        self.addCleanup(self.close_all, server)
        return server, client, f"http://127.0.0.1:{port.getHost().port}"

    async def close_all(self, server: RawServer) -> None:
        for conn in server.connections:
            if not conn.closed:
                conn.transport.abortConnection()
        await wait_for(lambda: server.open_connections == 0)

    async def get(self, client: UpstreamClient, url: str, method: str = "GET",
                  body: bytes | None = None) -> tuple[UpstreamResponse, bytes]:
        response = await client.request(method, url, None, body, first_byte_timeout=5)
        return response, await response.read_all(1 << 20)

    async def test_sequential_requests_share_one_connection(self) -> None:
        server, client, url = self.serve(reply(ok()))
        for i in range(5):
            response, body = await self.get(client, f"{url}/r{i}", "POST", b"{}")
            assert (response.code, response.phrase, body) == (200, b"OK", b"hello")
            assert response.header(b"content-type") == b"text/plain"
            assert response.length == 5
        assert [path for _, path, _ in server.requests] == [b"/r%d" % i for i in range(5)]
        assert len(server.connections) == 1
        assert client.connections_opened == 1

    async def test_content_length_chunked_and_close_delimited_bodies(self) -> None:
        answers = {
            b"/length": ok(b"0123456789"),
            b"/chunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          b"4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n"),
            b"/close": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
        }

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.write(answers[path])
            if path == b"/close":
                proto.transport.loseConnection()

        server, client, url = self.serve(handle)
        response, body = await self.get(client, url + "/length")
        assert body == b"0123456789"
        response, body = await self.get(client, url + "/chunked")
        assert body == b"abcdefg"
        assert response.length is None
        response, body = await self.get(client, url + "/close")
        assert body == b"until the end"
        assert response.length is None
        assert len(server.connections) == 1  # the first two reused it; the server closed it
        response, body = await self.get(client, url + "/length")
        assert body == b"0123456789"
        assert len(server.connections) == 2  # a closed connection is never pooled

    async def test_a_response_arriving_byte_by_byte(self) -> None:
        answer = (b"HTTP/1.1 100 Continue\r\n\r\n"
                  b"HTTP/1.1 201 Created\r\nX-Thing: a\r\nX-Thing: b\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.setTcpNoDelay(True)

            def send(i: int) -> None:
                if i < len(answer) and not proto.closed:
                    proto.transport.write(answer[i:i + 1])
                    reactor.callLater(0.0005, send, i + 1)
            send(0)

        server, client, url = self.serve(handle)
        for _ in range(2):
            response, body = await self.get(client, url + "/slow")
            assert (response.code, body) == (201, b"hello world")  # the 100 was skipped
            assert response.headers.getRawHeaders(b"x-thing") == [b"a", b"b"]
            assert (b"X-Thing", [b"a", b"b"]) in list(response.headers.getAllRawHeaders())
        assert len(server.connections) == 1

    async def test_head_204_and_304_have_no_body(self) -> None:
        answers = {
            b"/204": b"HTTP/1.1 204 No Content\r\n\r\n",
            b"/304": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n",
            b"/head": b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n",
        }
        server, client, url = self.serve(
            lambda proto, method, path, body: proto.transport.write(answers[path]))
        for path, method in (("/204", "GET"), ("/304", "GET"), ("/head", "HEAD")):
            response, body = await self.get(client, url + path, method)
            assert body == b""
        response, body = await self.get(client, url + "/204")
        assert response.code == 204
        # 204 and 304 reused the first connection; after HEAD it was retired
        assert len(server.connections) == 2

    async def test_a_stale_pooled_connection_resends_only_an_idempotent_request(self) -> None:
        """The server drops the pooled connection as the request arrives (the keep-alive race).
        A GET is sent again on a fresh connection; a POST never goes out twice."""
        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            if path == b"/drop" and proto is server.connections[0]:
                proto.transport.loseConnection()
            else:
                proto.transport.write(ok())

        server, client, url = self.serve(handle)
        await self.get(client, url + "/first")
        _response, body = await self.get(client, url + "/drop")
        assert body == b"hello"
        assert [p for _, p, _ in server.requests] == [b"/first", b"/drop", b"/drop"]
        assert len(server.connections) == 2
        await self.close_all(server)
        server.connections.clear()
        server.requests.clear()
        await self.get(client, url + "/first")
        with self.assertRaises(UpstreamUnavailable):
            await client.request("POST", url + "/drop", None, b"{}", first_byte_timeout=5)
        assert [p for _, p, _ in server.requests] == [b"/first", b"/drop"]

    async def test_an_idle_pooled_connection_closed_by_the_server_is_not_used(self) -> None:
        server, client, url = self.serve(reply(ok()))
        await self.get(client, url + "/a")
        server.connections[0].transport.loseConnection()
        await wait_for(lambda: server.open_connections == 0)
        await deferLater(reactor, 0.01, lambda: None)  # the client reads the close
        _response, body = await self.get(client, url + "/b", "POST", b"{}")
        assert body == b"hello"
        assert [p for _, p, _ in server.requests] == [b"/a", b"/b"]
        assert len(server.connections) == 2

    async def test_idle_connections_are_closed_after_the_idle_timeout(self) -> None:
        clock = Clock()
        server, client, url = self.serve(reply(ok()), clock=clock, cached_connection_timeout=60)
        await self.get(client, url + "/a")
        clock.advance(30)
        assert server.open_connections == 1
        clock.advance(31)
        await wait_for(lambda: server.open_connections == 0)

    async def test_pause_stops_reading_and_resume_finishes_the_body(self) -> None:
        piece = b"x" * 65536
        total = 64

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
                                  % (len(piece) * total))
            for _ in range(total):
                proto.transport.write(piece)

        _server, client, url = self.serve(handle)
        response = await client.request("GET", url + "/big", None, None, first_byte_timeout=5)
        sink = Collected()
        response.pause()  # before delivery: no effect
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: len(sink.data) > 0)
        response.pause()
        assert response.pause_count == 1
        await deferLater(reactor, 0.05, lambda: None)
        held = len(sink.data)
        await deferLater(reactor, 0.1, lambda: None)
        assert len(sink.data) == held < len(piece) * total
        response.resume()
        await wait_for(lambda: sink.finished)
        assert sink.reason is None
        assert len(sink.data) == len(piece) * total

    async def test_abort_mid_body_closes_the_socket(self) -> None:
        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf"
                                  if path == b"/x" else ok())

        server, client, url = self.serve(handle)
        response = await client.request("GET", url + "/x", None, None, first_byte_timeout=5)
        sink = Collected()
        response.deliver(sink, idle_timeout=30)
        await wait_for(lambda: sink.data == b"half")
        response.abort()
        assert sink.finished and isinstance(sink.reason.value, UpstreamAborted)  # type: ignore[union-attr]
        await wait_for(lambda: server.open_connections == 0)
        await self.get(client, url + "/y")  # not hung: a fresh connection
        assert len(server.connections) == 2

    async def test_malformed_responses(self) -> None:
        answers = {
            b"/status": b"HTTP/1.1 abc Nope\r\n\r\n",
            b"/garbage": b"this is not http\r\n\r\n",
            b"/upgrade": (b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
                          b"Upgrade: websocket\r\n\r\n"),
            b"/chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
            b"/short": b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
        }

        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            proto.transport.write(answers[path])
            if path == b"/short":
                proto.transport.loseConnection()
            if path == b"/chunk":  # a bad chunk size once the headers were answered
                reactor.callLater(0.05, proto.transport.write, b"zz\r\nabc\r\n")

        server, client, url = self.serve(handle)
        for path in ("/status", "/garbage", "/upgrade"):
            with self.assertRaises(UpstreamUnavailable):
                await client.request("POST", url + path, None, b"", first_byte_timeout=5)
        for path in ("/chunk", "/short"):
            response = await client.request("POST", url + path, None, b"", first_byte_timeout=5)
            with self.assertRaises(UpstreamBodyFailed):
                await response.read_all(1 << 20)
        await wait_for(lambda: server.open_connections == 0)
        assert len(server.connections) == 5  # a connection that broke is never reused

    async def test_header_values_cannot_inject_lines(self) -> None:
        server, client, url = self.serve(reply(ok()))
        response = await client.request(
            "GET", url + "/h", {b"x-a": [b"one\r\nx-injected: yes"]}, None,
            first_byte_timeout=5)
        await response.read_all(100)
        lines = server.heads[0].split(b"\r\n")
        assert b"x-a: one x-injected: yes" in lines
        assert not [line for line in lines if line.lower().startswith(b"x-injected")]

    async def test_https_with_a_test_certificate(self) -> None:
        directory = tempfile.mkdtemp()
        ca_file, cert_file, key_file = make_certificates(directory)
        with open(cert_file, "rb") as f:
            cert_pem = f.read()
        with open(key_file, "rb") as f:
            key_pem = f.read()
        with open(ca_file, "rb") as f:
            ca = ssl.Certificate.loadPEM(f.read())
        server = RawServer(reply(ok(b"secret")))
        server_cert = ssl.PrivateCertificate.loadPEM(cert_pem + key_pem)
        port = reactor.listenSSL(0, server, server_cert.options(), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        self.addCleanup(self.close_all, server)
        url = f"https://127.0.0.1:{port.getHost().port}/v1/x"
        client = UpstreamClient(reactor, tls_policy=BrowserLikePolicyForHTTPS(trustRoot=ca))
        self.addCleanup(client.close)
        for _ in range(3):
            response, body = await self.get(client, url)
            assert (response.code, body) == (200, b"secret")
        assert len(server.connections) == 1
        untrusting = UpstreamClient(reactor)  # the system roots do not know the test CA
        self.addCleanup(untrusting.close)
        with self.assertRaises(UpstreamUnavailable):
            await untrusting.request("GET", url, None, None, first_byte_timeout=5)
        assert len(server.requests) == 3

    async def test_an_answer_read_whole_is_handed_over_ended_on_a_pooled_connection(self
                                                                                  ) -> None:
        """Head and body in one read: when the caller hears of the answer, the connection is
        already back in the pool (a request sent right there reuses it) and ``read_all`` has
        its bytes at once -- no second callback round (issue 22)."""
        server, client, url = self.serve(reply(ok()))
        seen: list[Any] = []

        def answered(response: UpstreamResponse) -> Deferred[Any]:
            reading = response.read_all(1 << 20)
            seen.append(reading.called)
            reading.addCallback(seen.append)
            # sent from inside the answer's callback: the pooled connection takes it
            return client.request("GET", url + "/second", None, None, first_byte_timeout=5)

        second = await client.request("GET", url + "/first", None, None,
                                      first_byte_timeout=5).addCallback(answered)
        assert seen == [True, b"hello"]
        assert await second.read_all(1 << 20) == b"hello"
        assert [p for _, p, _ in server.requests] == [b"/first", b"/second"]
        assert len(server.connections) == 1

    async def test_aborting_an_answer_read_whole_still_closes_its_connection(self) -> None:
        """An answer that came whole is pooled before its caller sees it; aborting it (the
        client left, the body is too large) still closes that connection, unused."""
        server, client, url = self.serve(reply(ok()))
        response = await client.request("GET", url + "/a", None, None, first_byte_timeout=5)
        response.abort()
        await wait_for(lambda: server.open_connections == 0)
        sink = Collected()
        response.deliver(sink, idle_timeout=5)
        assert sink.finished and sink.reason is not None and sink.reason.check(UpstreamAborted)
        _response, body = await self.get(client, url + "/b")
        assert body == b"hello" and len(server.connections) == 2

    async def test_collect_gives_a_whole_answer_at_once_and_waits_for_one_still_coming(
            self) -> None:
        """``collect``: the bytes themselves (no Deferred) for an answer read whole with its
        head; a Deferred for a body still arriving; a known failure raised at once."""
        def handle(proto: RawServerProtocol, method: bytes, path: bytes, body: bytes) -> None:
            if path == b"/later":
                proto.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe")
                reactor.callLater(0.05, proto.transport.write, b"llo")
            else:
                proto.transport.write(ok())

        server, client, url = self.serve(handle)
        whole = await client.request("GET", url + "/now", None, None, first_byte_timeout=5)
        assert whole.collect(1 << 20) == b"hello"
        later = await client.request("GET", url + "/later", None, None, first_byte_timeout=5)
        waiting = later.collect(1 << 20)
        assert isinstance(waiting, Deferred)
        assert await waiting == b"hello"
        too_large = await client.request("GET", url + "/big", None, None, first_byte_timeout=5)
        with self.assertRaises(BodyTooLarge):
            too_large.collect(3)
        assert len(server.requests) == 3


class CancelTests(TestCase):
    async def test_cancel_while_waiting_for_headers_closes_the_socket(self) -> None:
        server = RawServer(lambda proto, method, path, body: None)  # never answers
        port = reactor.listenTCP(0, server, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = UpstreamClient(reactor)
        self.addCleanup(client.close)
        pending: Deferred[Any] = client.request(
            "GET", f"http://127.0.0.1:{port.getHost().port}/", None, None, first_byte_timeout=5)
        outcome: list[Any] = []
        pending.addBoth(outcome.append)
        await wait_for(lambda: len(server.requests) == 1)
        pending.cancel()
        await wait_for(lambda: server.open_connections == 0)
        assert len(outcome) == 1 and isinstance(outcome[0], Failure)
