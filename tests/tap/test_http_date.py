"""The ``Date`` header kept per second, and ``LockgateRequest``'s own dispatch that uses it.

``HttpDate.now`` must give ``datetimeToString``'s bytes for every second, never the text of an
earlier second (a cache that ignored the second, or kept it too long, fails here).  The dispatch
replaces twisted.web's ``Request.process``: on real loopback connections the same resources,
served through twisted.web's own ``Site`` and through ``LockgateSite``, give the same bytes
(``Date`` aside) for an encoded (gzip) answer, a resource that raises (500), ``OPTIONS *`` and
a path with escapes; and the ``Date`` sent is the current second's.
"""

from __future__ import annotations

import random
import re
import socket
import time
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.http import datetimeToString, stringToDatetime
from twisted.web.resource import EncodingResourceWrapper, Resource
from twisted.web.server import GzipEncoderFactory, Site

from tap.http_channel import LockgateSite
from tap.http_date import HttpDate

reactor: Any = global_reactor


class HttpDateTests(TestCase):
    def test_each_second_gets_its_own_text(self) -> None:
        date = HttpDate()
        rng = random.Random(22)
        second = 1_764_000_000
        for _ in range(2000):
            second += rng.choice([0, 0, 1, 1, 59, 3600, 86_399])
            fraction = rng.random() * 0.999
            assert date.now(second + fraction) == datetimeToString(second), second

    def test_the_wall_clock_by_default(self) -> None:
        date = HttpDate()
        before = int(time.time())
        text = date.now()
        after = int(time.time())
        assert text in {datetimeToString(s) for s in range(before, after + 1)}


class _Leaf(Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        if request.path == b"/boom":
            raise RuntimeError("resource failed")
        return b"path " + request.path + b" postpath " + b"|".join(request.postpath)


class _Root(Resource):
    def __init__(self) -> None:
        super().__init__()
        self.putChild(b"gz", EncodingResourceWrapper(_Leaf(), [GzipEncoderFactory()]))
        self.putChild(b"boom", _Leaf())
        self.putChild(b"a b", _Leaf())


def _exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def _request(method: bytes, target: bytes, extra: bytes = b"") -> bytes:
    return (method + b" " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + extra
            + b"\r\n")


def _date(answer: bytes) -> bytes:
    found = re.search(rb"\r\nDate: ([^\r]*)", answer)
    assert found is not None, answer
    return found.group(1)


def _without_date(answer: bytes) -> bytes:
    return re.sub(rb"\r\nDate: [^\r]*", b"\r\nDate: -", answer)


class DispatchTests(TestCase):
    def setUp(self) -> None:
        root = _Root()
        self.lockgate = reactor.listenTCP(0, LockgateSite(root), interface="127.0.0.1")
        self.addCleanup(self.lockgate.stopListening)
        self.twisted = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(self.twisted.stopListening)

    async def test_the_same_answers_as_twisted_webs_process(self) -> None:
        cases = [_request(b"GET", b"/gz/x/y", b"Accept-Encoding: gzip\r\n"),
                 _request(b"GET", b"/gz/x"), _request(b"GET", b"/boom"),
                 _request(b"OPTIONS", b"*"), _request(b"GET", b"/a%20b/c%2Fd/e"),
                 _request(b"GET", b"/missing")]
        for data in cases:
            before = int(time.time())
            ours = await deferToThread(_exchange, self.lockgate.getHost().port, data)
            after = int(time.time())
            theirs = await deferToThread(_exchange, self.twisted.getHost().port, data)
            assert _without_date(ours) == _without_date(theirs), (data, ours, theirs)
            assert before <= stringToDatetime(_date(ours)) <= after, ours
        self.flushLoggedErrors(RuntimeError)
