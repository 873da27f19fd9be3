"""Twisted's request and channel attributes live in slots, not in per-instance dicts (issue 22).

An open stream keeps its ``LockgateRequest`` and ``LockgateChannel`` for its whole life; their
``__dict__``s were ~1.5 KiB each.  Real loopback connections through a real ``LockgateSite``:
a streamed answer (registered producer, chunked writes), an ordinary one, a form POST (the
console's path through ``request.args``), a keep-alive second request and a refused one; after
each, everything Twisted set is in a slot.  A name Twisted sets that the slots miss would land
in the ``__dict__`` and fail these tests.
"""

from __future__ import annotations

import socket
import tracemalloc
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IPushProducer
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET
from twisted.web.test.requesthelper import DummyChannel
from zope.interface import implementer

from tap import slot_defaults
from tap.http_channel import LockgateChannel, LockgateSite
from tap.http_request import LockgateRequest

reactor: Any = global_reactor


@implementer(IPushProducer)
class _Producer:
    def pauseProducing(self) -> None: ...

    def resumeProducing(self) -> None: ...

    def stopProducing(self) -> None: ...


class _Held(Resource):
    """Streams one event and holds the request open; or answers at once (``/plain``)."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Any] = []
        self.channels: list[Any] = []
        self.arrived: Deferred[None] = Deferred()

    def render_POST(self, request: Any) -> Any:
        self.requests.append(request)
        self.channels.append(request.channel)
        if request.path == b"/plain":
            request.args  # the console's form fields
            return b"{}"
        request.lockgate_model = "m"
        request.setHeader(b"x-request-id", b"abc")
        request.responseHeaders.addRawHeader(b"content-type", b"text/event-stream")
        request.registerProducer(_Producer(), True)
        request.write(b"data: 1\n\n")
        if not self.arrived.called:
            self.arrived.callback(None)
        return NOT_DONE_YET


def _post(path: bytes, body: bytes, content_type: bytes = b"application/json") -> bytes:
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: " + content_type
            + b"\r\nContent-Length: " + str(len(body)).encode()
            + b"\r\nAuthorization: Bearer k\r\n\r\n" + body)


def _read_some(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    return sock.recv(65536)


def _dict_of(instance: object) -> dict[str, Any]:
    return dict(vars(instance))


class SlottedHttpTests(TestCase):
    def setUp(self) -> None:
        self.resource = _Held()
        self.port = reactor.listenTCP(0, LockgateSite(self.resource), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.sockets: list[socket.socket] = []

    def tearDown(self) -> Any:
        for sock in self.sockets:
            sock.close()
        for request in self.resource.requests:
            if not request.finished and request.channel is not None:
                request.unregisterProducer()
                request.finish()
        return deferLater(reactor, 0.05, lambda: None)

    async def _connect_and_send(self, data: bytes) -> socket.socket:
        sock = await deferToThread(socket.create_connection,
                                   ("127.0.0.1", self.port.getHost().port))
        self.sockets.append(sock)
        await deferToThread(sock.sendall, data)
        return sock

    async def test_an_open_stream_keeps_no_request_or_channel_dict(self) -> None:
        sock = await self._connect_and_send(_post(b"/v1/chat/completions", b"{}"))
        await self.resource.arrived
        first = await deferToThread(_read_some, sock)
        assert b"data: 1" in first or b"200" in first, first
        request = self.resource.requests[0]
        assert isinstance(request, LockgateRequest)
        assert _dict_of(request) == {}
        channel = request.channel
        assert isinstance(channel, LockgateChannel)
        # the factory sets callLater (a method on the class: not slotted); nothing else
        assert set(_dict_of(channel)) <= {"callLater"}, _dict_of(channel)

    async def test_plain_form_and_keep_alive_requests_keep_no_dict(self) -> None:
        sock = await self._connect_and_send(
            _post(b"/plain", b"a=1", b"application/x-www-form-urlencoded")
            + _post(b"/plain", b"{}"))
        answers = b""
        while answers.count(b"HTTP/1.1 200") < 2:
            answers += await deferToThread(_read_some, sock)
        first = self.resource.requests[0]
        assert len(self.resource.requests) == 2
        assert first.args == {b"a": [b"1"]}
        for request, channel in zip(self.resource.requests, self.resource.channels):
            assert request.finished
            # Request._cleanup dels content: reading it gives the class default, as before
            assert request.content is None
            assert _dict_of(request) == {}
            assert set(_dict_of(channel)) <= {"callLater"}, _dict_of(channel)

    async def test_a_refused_request_keeps_no_dict(self) -> None:
        sock = await self._connect_and_send(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
            + str(1 << 40).encode() + b"\r\n\r\n")
        answer = await deferToThread(_read_some, sock)
        assert b" 413 " in answer, answer
        channels = [p for p in self._protocols() if isinstance(p, LockgateChannel)]
        assert channels
        for channel in channels:
            # refuse() swaps dataReceived for a discarding one: the only other instance entry
            assert set(_dict_of(channel)) <= {"callLater", "dataReceived"}, _dict_of(channel)

    def _protocols(self) -> list[Any]:
        return [selectable.protocol for selectable in reactor.getReaders()
                if hasattr(selectable, "protocol")]


class SlotDefaultsTests(TestCase):
    def test_twisted_class_defaults_are_read_before_they_are_set(self) -> None:
        request = LockgateRequest(DummyChannel(), False)
        # class-level defaults of twisted.web's Request, now instance slots
        assert request.code == 200 and request.finished == 0 and request.method is not None
        assert request.lockgate_model == "" and request.body_limit is None

    def test_a_deleted_attribute_reads_as_its_class_default_again(self) -> None:
        # the attribute twisted.web dels that has a class default (Request._cleanup)
        request = LockgateRequest(DummyChannel(), False)
        request.content = object()
        del request.content
        assert request.content is None
        request.client = object()
        del request.client  # no class default: really gone, as with a dict
        assert not hasattr(request, "client")

    def test_attribute_stores_stay_at_c_speed(self) -> None:
        # a Python-level __delattr__ on the class would route every store through Python
        # (CPython's one setattr/delattr slot): ~10x slower, a fifth of a request's time
        for cls in (LockgateRequest, LockgateChannel):
            assert cls.__setattr__ is object.__setattr__, cls
            assert cls.__delattr__ is object.__delattr__, cls

    def test_the_filler_stores_what_fill_stores(self) -> None:
        from tap.http_request import _DEFAULTS
        by_fill = LockgateRequest.__new__(LockgateRequest)
        by_filler = LockgateRequest.__new__(LockgateRequest)
        slot_defaults.fill(by_fill, _DEFAULTS)
        slot_defaults.filler(_DEFAULTS)(by_filler)
        for name, value in _DEFAULTS.items():
            assert getattr(by_filler, name) is getattr(by_fill, name) is value, name
        assert not hasattr(by_filler, "__dict__") or not vars(by_filler)
        # every slotted default, and only those: a request is built with exactly them
        built = LockgateRequest(DummyChannel(), False)
        assert built.body_limit is None and built._body_received == 0
        with self.assertRaises(ValueError):
            slot_defaults.filler({"not a name": 1})
        assert slot_defaults.filler({})(object()) is None

    def test_a_method_cannot_be_slotted(self) -> None:
        with self.assertRaises(TypeError):
            slot_defaults.class_defaults(LockgateRequest.__mro__[1], ("write",))

    def test_a_request_and_its_channel_take_under_a_kib_without_headers(self) -> None:
        dummy = DummyChannel()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            kept = []
            for _ in range(500):
                channel = LockgateChannel()
                channel.transport, channel.site = dummy.transport, dummy.site  # type: ignore[attr-defined]
                kept.append(LockgateRequest(channel, parsePOSTFormSubmission=False))
            each = (tracemalloc.get_traced_memory()[0] - before) / 500
        finally:
            tracemalloc.stop()
        # the headers objects and notifications list are in the figure; the request's and
        # channel's dicts alone were ~3 KiB together
        assert each < 2048, each
