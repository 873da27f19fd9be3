"""``LockgateRequest.on_connection_lost`` and ``when_done``: hooks without a Deferred (issue 22).

They stand in for ``notifyFinish().addErrback(hook)`` (a /v1 call's hang-up) and
``.addBoth(hook)`` (the drain's in-flight count), so they must run exactly when those would:
once, with the reason, when the client goes away before the answer is done; ``when_done``
with ``None`` once it is answered, the other never; in the order they were registered among
``notifyFinish`` Deferreds; and the hook (a bound method of the call, which holds the request)
is let go when the request is done with, so no reference cycle outlives it.  Real loopback
connections through a real ``LockgateSite``.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure
from twisted.trial.unittest import TestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from tap.http_channel import LockgateSite
from tap.http_request import LockgateRequest
from tests.support.waiting import wait_for

reactor: Any = global_reactor


class _Hooked(Resource):
    """Registers two hooks on every request; ``/held`` stays open, anything else answers."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Any] = []
        self.channels: list[Any] = []
        self.lost: list[tuple[str, Any, Failure]] = []
        self.done: list[tuple[Any, Failure | None]] = []
        self.arrived: Deferred[None] = Deferred()

    def render_POST(self, request: Any) -> Any:
        self.requests.append(request)
        self.channels.append(request.channel)
        for name in ("first", "second"):
            request.on_connection_lost(
                lambda reason, name=name, request=request: self.lost.append(
                    (name, request, reason)))
        request.when_done(lambda reason, request=request: self.done.append((request, reason)))
        if request.path == b"/held":
            request.write(b"")
            self.arrived.callback(None)
            return NOT_DONE_YET
        return b"{}"


def _post(path: bytes) -> bytes:
    return b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


def _read_until(sock: socket.socket, count: int) -> bytes:
    sock.settimeout(10)
    data = b""
    while data.count(b"HTTP/1.1 200") < count:
        data += sock.recv(65536)
    return data


class ConnectionLostHookTests(TestCase):
    def setUp(self) -> None:
        self.resource = _Hooked()
        self.port = reactor.listenTCP(0, LockgateSite(self.resource), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)

    async def _connect(self) -> socket.socket:
        sock = await deferToThread(socket.create_connection,
                                   ("127.0.0.1", self.port.getHost().port))
        self.addCleanup(sock.close)
        return sock

    async def test_a_hang_up_before_the_answer_runs_each_hook_once(self) -> None:
        sock = await self._connect()
        await deferToThread(sock.sendall, _post(b"/held"))
        await self.resource.arrived
        request = self.resource.requests[0]
        assert isinstance(request, LockgateRequest)
        # the hooks wait in twisted.web's own list, in order, and no Deferred was made
        assert len(request.notifications) == 3
        assert not any(isinstance(n, Deferred) for n in request.notifications)
        sock.close()
        await wait_for(lambda: len(self.resource.lost) == 2)
        assert [(name, req) for name, req, _ in self.resource.lost] == [
            ("first", request), ("second", request)]
        assert all(isinstance(reason, Failure) for _, _, reason in self.resource.lost)
        # when_done hears the same loss, once
        assert len(self.resource.done) == 1 and self.resource.done[0][0] is request
        assert isinstance(self.resource.done[0][1], Failure)

    async def test_hooks_run_in_order_with_notify_finish_errbacks(self) -> None:
        """A hook registered between two ``notifyFinish()`` errbacks runs between them (a
        /v1 call's hook, then its stream writer's and its fan-out's Deferreds)."""
        order: list[str] = []

        def render(request: Any) -> Any:
            request.notifyFinish().addErrback(lambda _: order.append("deferred before"))
            request.on_connection_lost(lambda _: order.append("hook"))
            request.notifyFinish().addErrback(lambda _: order.append("deferred after"))
            request.write(b"")
            self.resource.arrived.callback(None)
            return NOT_DONE_YET

        self.resource.render_POST = render  # type: ignore[method-assign]
        sock = await self._connect()
        await deferToThread(sock.sendall, _post(b"/held"))
        await self.resource.arrived
        sock.close()
        await wait_for(lambda: len(order) == 3)
        assert order == ["deferred before", "hook", "deferred after"]

    async def test_answered_requests_never_run_their_hooks_and_let_them_go(self) -> None:
        sock = await self._connect()
        await deferToThread(sock.sendall, _post(b"/a") + _post(b"/b"))
        await deferToThread(_read_until, sock, 2)
        await wait_for(lambda: len(self.resource.requests) == 2
                       and all(r.finished for r in self.resource.requests))
        for request in self.resource.requests:
            assert request.notifications == []  # let go: no cycle through the hooks
        # when_done heard each good end, once, with None
        assert self.resource.done == [(r, None) for r in self.resource.requests]
        sock.close()
        await wait_for(lambda: all(c.transport.disconnected for c in self.resource.channels))
        assert self.resource.lost == []
