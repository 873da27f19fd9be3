"""What an open /v1 stream keeps for its whole life: no request body buffer, no error made in
advance (issue 22: 10,000 open streams per process).

A real app, a real loopback upstream that sends one event and then holds its stream open, raw
socket clients that read the first event and stay connected.  While the streams are open:
twisted.web's buffer of the request body is released (the parsed request keeps what failover
needs), and no ``GatewayError`` lives per stream (the fallback outcomes of the call and of its
attempt loop are made only when they are the answer).
"""

from __future__ import annotations

import gc
import socket
from typing import Any

import orjson
from twisted.internet import reactor as global_reactor
from twisted.internet.task import deferLater
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.errors import GatewayError
from gateway.store import schema
from gateway.v1.text_route import TextCall
from tests.gateway.gateway_case import GatewayTestCase

STREAMS = 3
reactor: Any = global_reactor


class HoldingUpstream(Resource):
    """Sends one chat chunk, then holds every stream open until ``release``."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Any] = []

    def render_POST(self, request: Any) -> Any:
        request.setHeader(b"content-type", b"text/event-stream")
        chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-fake",
                 "choices": [{"index": 0, "delta": {"content": "hi "}, "finish_reason": None}]}
        request.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
        self.held.append(request)
        return NOT_DONE_YET

    def release(self) -> None:
        for request in self.held:
            if not request.finished and request.channel is not None:
                request.finish()


def _open_stream(port: int, key: str) -> socket.socket:
    """A streamed chat call over a raw socket, left open once its first event arrived."""
    body = orjson.dumps({"model": "gpt-fake", "stream": True,
                         "messages": [{"role": "user", "content": "one two three " * 50}]})
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                 b"Authorization: Bearer " + key.encode() + b"\r\n"
                 b"Content-Type: application/json\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    data = b""
    while b"data:" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"stream closed before its first event: {data[:300]!r}")
        data += chunk
    return sock


def _live_errors() -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if isinstance(obj, GatewayError))


class OpenStreamKeepsTests(GatewayTestCase):
    async def test_an_open_stream_keeps_no_body_buffer_and_no_error(self) -> None:
        await self.provision()
        upstream = HoldingUpstream()
        port = reactor.listenTCP(0, Site(upstream), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        await self.catalog.set(schema.channels, self.channel_id,
                               base_url=f"http://127.0.0.1:{port.getHost().port}")
        await self.catalog.announce()
        sockets: list[socket.socket] = []
        try:
            sockets.append(await self.in_thread(_open_stream, self.port.getHost().port,
                                                self.api_key))  # the first: warm-up
            errors_before = _live_errors()
            for _ in range(STREAMS):
                sockets.append(await self.in_thread(_open_stream, self.port.getHost().port,
                                                    self.api_key))
            calls = [obj for obj in gc.get_objects() if isinstance(obj, TextCall)]
            assert len(calls) == STREAMS + 1, calls
            for call in calls:
                assert call.writer is not None and call.writer.started
                assert call.request.content is None
            assert _live_errors() == errors_before
        finally:
            for sock in sockets:
                sock.close()
            upstream.release()
        rows: list[dict[str, Any]] = []
        for _ in range(200):  # each hung-up stream settles once (group commit)
            rows = await self.usage_rows()
            if len(rows) == STREAMS + 1:
                break
            await deferLater(reactor, 0.05, lambda: None)
        assert len(rows) == STREAMS + 1, rows
