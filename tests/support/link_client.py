"""A connector device's side of the WebSocket link, for tests: autobahn's client on the real
reactor, every received frame queued, the close code kept."""

from __future__ import annotations

from typing import Any

import orjson
from autobahn.twisted.websocket import (
    WebSocketClientFactory,
    WebSocketClientProtocol,
    connectWS,
)
from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredQueue

TIMEOUT = 10.0


class LinkClient(WebSocketClientProtocol):
    def __init__(self) -> None:
        super().__init__()
        self.frames: DeferredQueue[dict[str, Any]] = DeferredQueue()
        self.opened: Deferred[LinkClient] = Deferred()
        self.closed: Deferred[tuple[int | None, str | None]] = Deferred()

    def onOpen(self) -> None:
        self.opened.callback(self)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.frames.put(orjson.loads(payload))

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        if not self.opened.called:
            self.opened.errback(ConnectionError(f"closed before open: {code} {reason}"))
        if not self.closed.called:
            self.closed.callback((code, reason))

    def send(self, frame: dict[str, Any]) -> None:
        self.sendMessage(orjson.dumps(frame), isBinary=False)

    async def next(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        d = self.frames.get()
        d.addTimeout(timeout, reactor)
        return await d

    async def next_of(self, kind: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        while True:
            frame = await self.next(timeout)
            if frame.get("type") == kind:
                return frame

    async def close_code(self, timeout: float = TIMEOUT) -> int | None:
        d: Deferred[tuple[int | None, str | None]] = Deferred()
        self.closed.addBoth(lambda result: (d.callback(result), result)[1])
        d.addTimeout(timeout, reactor)
        code, _ = await d
        return code

    async def hello(self, **fields: Any) -> dict[str, Any]:
        frame = {"type": "hello", "protocol": 1, "hostname": "test-box", "os": "linux",
                 "arch": "amd64", "version": "1.0.0", "kind": "cli", "mode": "platform"}
        frame.update(fields)
        self.send(frame)
        return await self.next_of("welcome")


async def connect(base_url: str, token: str, *, via: str = "header",
                  protocol: type[LinkClient] = LinkClient) -> LinkClient:
    """Open a link (``via`` header, bearer or query) and wait for the upgrade."""
    url = base_url.replace("http://", "ws://") + "/api/advanced-chat/connectors/ws"
    headers: dict[str, str] = {}
    if via == "header":
        headers["X-Connector-Token"] = token
    elif via == "bearer":
        headers["Authorization"] = f"Bearer {token}"
    else:
        url += f"?token={token}"
    factory = WebSocketClientFactory(url, headers=headers)
    factory.protocol = protocol
    factory.setProtocolOptions(autoPingInterval=0)
    created: list[LinkClient] = []
    original = factory.buildProtocol

    def build(addr: Any) -> Any:
        protocol = original(addr)
        created.append(protocol)
        return protocol

    factory.buildProtocol = build  # type: ignore[method-assign]
    connectWS(factory)
    for _ in range(1000):
        if created:
            break
        await _tick()
    client = created[0]
    opened = client.opened
    opened.addTimeout(TIMEOUT, reactor)
    return await opened


async def _tick() -> None:
    from twisted.internet.task import deferLater

    await deferLater(reactor, 0.005, lambda: None)
