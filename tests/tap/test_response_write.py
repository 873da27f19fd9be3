"""A response's head and first body bytes leave in one ``send()``, and the bytes are twisted.web's.

``LockgateChannel`` holds the head twisted.web builds while the request's first ``write`` runs
and sends it with that write's body straight to the socket (``tap.response_write``).  Real
loopback connections: the same resource answered through twisted.web's own ``Site`` and through
``LockgateSite`` gives the same bytes (Date aside) for every shape of answer -- a sized body,
chunked writes, an empty answer, 204, HEAD, a 404 -- and a streamed answer's head still leaves
at its first (empty) write, before any body.  An ordinary answer leaves the transport with
nothing buffered and no write watch; on twisted.web's path both the head and body would wait
for the next reactor pass.
"""

from __future__ import annotations

import re
import socket
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from tap.http_channel import LockgateSite

reactor: Any = global_reactor

_BODY = b'{"id":"chatcmpl-1","choices":[]}'


class _Answers(Resource):
    """One answer per path, written the ways the gateway and the console write them."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        #: after the sized answer's write: (bytes still buffered, watched for writing)
        self.after_write: list[tuple[int, bool]] = []
        #: the streamed answer waits on this before its body
        self.go_on: Deferred[None] = Deferred()

    def render_GET(self, request: Any) -> Any:
        return self.render_POST(request)

    def render_HEAD(self, request: Any) -> Any:
        return self.render_POST(request)

    def render_POST(self, request: Any) -> Any:
        path = request.path
        if path == b"/sized":
            request.setHeader(b"x-request-id", b"req-1")
            request.setHeader(b"content-type", b"application/json")
            request.setHeader(b"content-length", str(len(_BODY)).encode())
            request.write(_BODY)
            transport = request.channel.transport
            self.after_write.append((len(transport.dataBuffer) + sum(
                len(piece) for piece in transport._tempDataBuffer),
                transport in reactor.getWriters()))
            request.finish()
        elif path == b"/chunked":
            request.write(b"a")
            request.write(b"bc")
            request.finish()
        elif path == b"/empty":
            request.finish()
        elif path == b"/no-content":
            request.setResponseCode(204)
            request.finish()
        elif path == b"/stream":
            request.setHeader(b"content-type", b"text/event-stream")
            request.write(b"")

            def rest(_: object) -> None:
                request.write(b"data: 1\n\n")
                request.finish()

            self.go_on.addCallback(rest)
        else:
            request.setResponseCode(404)
            return b"not here"
        return NOT_DONE_YET


def _request(method: bytes, path: bytes) -> bytes:
    body = b"{}" if method == b"POST" else b""
    return (method + b" " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            + (b"Content-Length: 2\r\n" if body else b"") + b"\r\n" + body)


def _exchange(port: int, data: bytes) -> bytes:
    """Everything the server sends until it closes (``Connection: close``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def _without_date(answer: bytes) -> bytes:
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", answer)


class ResponseWriteTests(TestCase):
    def setUp(self) -> None:
        self.resource = _Answers()
        self.lockgate = reactor.listenTCP(0, LockgateSite(self.resource), interface="127.0.0.1")
        self.addCleanup(self.lockgate.stopListening)
        self.twisted = reactor.listenTCP(0, Site(self.resource), interface="127.0.0.1")
        self.addCleanup(self.twisted.stopListening)

    async def _both(self, data: bytes) -> tuple[bytes, bytes]:
        ours = await deferToThread(_exchange, self.lockgate.getHost().port, data)
        theirs = await deferToThread(_exchange, self.twisted.getHost().port, data)
        return _without_date(ours), _without_date(theirs)

    async def test_every_shape_of_answer_is_twisted_webs_bytes(self) -> None:
        for method, path in [(b"POST", b"/sized"), (b"POST", b"/chunked"), (b"GET", b"/empty"),
                             (b"POST", b"/no-content"), (b"HEAD", b"/sized"),
                             (b"HEAD", b"/chunked"), (b"GET", b"/missing")]:
            ours, theirs = await self._both(_request(method, path))
            assert ours == theirs, (method, path, ours, theirs)
            assert ours.startswith(b"HTTP/1.1 "), ours
        ours, _ = await self._both(_request(b"POST", b"/sized"))
        assert ours.endswith(b"\r\n\r\n" + _BODY), ours

    async def test_a_sized_answer_leaves_nothing_buffered_and_no_write_watch(self) -> None:
        await deferToThread(_exchange, self.lockgate.getHost().port,
                            _request(b"POST", b"/sized"))
        assert self.resource.after_write == [(0, False)], self.resource.after_write

    async def test_a_streamed_answers_head_leaves_at_its_first_empty_write(self) -> None:
        with socket.create_connection(("127.0.0.1", self.lockgate.getHost().port),
                                      timeout=10) as sock:
            await deferToThread(sock.sendall, _request(b"POST", b"/stream"))
            head = b""
            while b"\r\n\r\n" not in head:
                head += await deferToThread(sock.recv, 65536)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
            assert b"Transfer-Encoding: chunked" in head, head
            assert head.endswith(b"\r\n\r\n"), "no body before the resource wrote one"
            self.resource.go_on.callback(None)
            rest = b""
            while chunk := await deferToThread(sock.recv, 65536):
                rest += chunk
        assert rest == b"9\r\ndata: 1\n\n\r\n0\r\n\r\n", rest
        await deferLater(reactor, 0, lambda: None)
