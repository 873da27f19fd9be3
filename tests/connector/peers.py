"""Real loopback peers for the device programs: a §2.4 WebSocket server (autobahn) and a §2.3
long-poll HTTP server, each scripted by the test and recording every frame/request it got.

They stand in for Lockgate's server side (built in parallel): they follow the contract's
frames and status codes, not Lockgate's code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from autobahn.websocket.types import ConnectionDeny
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

WS_PATH = [b"api", b"advanced-chat", b"connectors", b"ws"]
DEVICE = {"id": "acd-test", "name": "Test", "status": "online", "online": True,
          "mode": "platform", "kind": "cli"}


async def wait_for(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll ``predicate`` on the real reactor until it is truthy (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await deferLater(reactor, 0.01, lambda: None)


class PeerProtocol(WebSocketServerProtocol):
    factory: LinkPeer

    def onConnect(self, request: Any) -> None:
        token = request.headers.get("x-connector-token", "")
        if token != self.factory.token:
            raise ConnectionDeny(401, "Invalid connector token")

    def onOpen(self) -> None:
        self.factory.connections.append(self)

    def onPing(self, payload: bytes) -> None:
        self.factory.pings += 1
        super().onPing(payload)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        frame = json.loads(payload)
        self.factory.frames.append(frame)
        self.factory.on_frame(self, frame)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if self in self.factory.connections:
            self.factory.connections.remove(self)
            self.factory.closed += 1

    def send(self, frame: dict[str, Any] | bytes) -> None:
        self.sendMessage(frame if isinstance(frame, bytes) else json.dumps(frame).encode())


class LinkPeer(WebSocketServerFactory):
    """The WebSocket peer: answers hello with welcome, then sends ``tasks``; acks results."""

    protocol = PeerProtocol

    def __init__(self, token: str = "wpc_good") -> None:
        super().__init__()
        self.token = token
        self.frames: list[dict[str, Any]] = []
        self.connections: list[PeerProtocol] = []
        self.closed = 0
        self.tasks: list[dict[str, Any]] = []
        self.ack_results = True
        #: False: a server that went quiet (no heartbeat_ack, nothing at all)
        self.answer_heartbeats = True
        self.heartbeat_interval = 20
        #: native pings received from devices
        self.pings = 0
        self.after_welcome: Callable[[PeerProtocol], None] | None = None

    def on_frame(self, connection: PeerProtocol, frame: dict[str, Any]) -> None:
        kind = frame.get("type")
        if kind == "hello":
            connection.send({"type": "welcome", "device": DEVICE,
                             "heartbeat_interval": self.heartbeat_interval,
                             "server_time": "2026-11-25T10:00:00.000Z"})
            if self.after_welcome is not None:
                self.after_welcome(connection)
            for task in self.tasks:
                connection.send({"type": "task", "task": task})
        elif kind == "task_result" and self.ack_results:
            connection.send({"type": "task_result_ack", "task_id": frame["task_id"], "ok": True})
        elif kind == "heartbeat" and self.answer_heartbeats:
            connection.send({"type": "heartbeat_ack", "server_time": "2026-11-25T10:00:20.000Z"})

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [frame for frame in self.frames if frame.get("type") == kind]


def listen(root: Resource, port: int = 0) -> Any:
    return reactor.listenTCP(port, Site(root), interface="127.0.0.1")


def websocket_site(peer: LinkPeer) -> Resource:
    root = Resource()
    node = root
    for segment in WS_PATH[:-1]:
        child = Resource()
        node.putChild(segment, child)
        node = child
    node.putChild(WS_PATH[-1], WebSocketResource(peer))
    return root


class _JSON(Resource):
    isLeaf = True

    def __init__(self, poll: PollPeer) -> None:
        super().__init__()
        self.poll = poll

    def render(self, request: Any) -> Any:
        path = "/".join(segment.decode() for segment in request.postpath)
        body = request.content.read()
        token = (request.getHeader("x-connector-token") or "")
        self.poll.requests.append((request.method.decode(), path, json.loads(body) if body else None))
        request.setHeader("content-type", "application/json")
        if token != self.poll.token:
            request.setResponseCode(401)
            return json.dumps({"error": "Invalid connector token"}).encode()
        return self.poll.answer(request, path, json.loads(body) if body else None)


class PollPeer:
    """The §2.3 endpoints under /api/advanced-chat/connectors/ (and no WebSocket: 404)."""

    def __init__(self, token: str = "wpc_good") -> None:
        self.token = token
        self.requests: list[tuple[str, str, Any]] = []
        self.tasks: list[dict[str, Any]] = []
        self.results: dict[str, list[dict[str, Any]]] = {}
        self.fail_results = 0
        self.hold = 0.2

    def site(self) -> Resource:
        root = Resource()
        api = Resource()
        chat = Resource()
        root.putChild(b"api", api)
        api.putChild(b"advanced-chat", chat)
        chat.putChild(b"connectors", _JSON(self))
        return root

    def answer(self, request: Any, path: str, body: Any) -> Any:
        if path == "register":
            return json.dumps(DEVICE).encode()
        if path == "heartbeat":
            return json.dumps({"ok": True, "device_id": DEVICE["id"]}).encode()
        if path == "tasks/next":
            if self.tasks:
                return json.dumps({"task": self.tasks.pop(0)}).encode()
            timer = reactor.callLater(self.hold, self._empty, request)
            request.notifyFinish().addErrback(lambda _f: timer.cancel() if timer.active() else None)
            return NOT_DONE_YET
        if path.startswith("tasks/") and path.endswith("/result"):
            if self.fail_results:
                self.fail_results -= 1
                request.setResponseCode(503)
                return b'{"error": "busy"}'
            self.results.setdefault(path.split("/")[1], []).append(body)
            return b'{"ok": true}'
        request.setResponseCode(404)
        return b'{"error": "not found"}'

    @staticmethod
    def _empty(request: Any) -> None:
        request.write(b'{"task": null}')
        request.finish()

    def of(self, path: str) -> list[Any]:
        return [body for _method, p, body in self.requests if p == path]


def settle(seconds: float = 0.05) -> Deferred[None]:
    return deferLater(reactor, seconds, lambda: None)
