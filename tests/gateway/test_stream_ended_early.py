"""The failure-matrix exit "stream ended before its end marker", end to end: an upstream that
closes its SSE body cleanly without ``data: [DONE]`` (gateway contract §9.4, DESIGN.md "a
failure after the first byte ends the stream with one error event ... billed for what was
delivered"; ``gateway.v1.outcome.StreamEndedEarly``)."""

from __future__ import annotations

import socket
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Site

from gateway.store import schema
from tests.gateway.gateway_case import GatewayTestCase, expected_cost_nanos
from tests.gateway.test_failure_matrix import _raw_stream


def _chunk(text: str) -> bytes:
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-fake",
             "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _event(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


#: a Messages stream cut after its first text delta: no ``message_delta``, no ``message_stop``
MESSAGES_FRAMES = [
    _event("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "gpt-fake",
        "content": [], "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
    _event("content_block_start", {"type": "content_block_start", "index": 0,
                                   "content_block": {"type": "text", "text": ""}}),
    _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": "part0 "}}),
]


class EndsEarlyUpstream(Resource):
    """An upstream whose streams stop after ``frames``: the HTTP body ends cleanly (chunked
    terminator), but without the protocol's end marker and without any error event."""

    isLeaf = True

    def __init__(self, frames: list[bytes]) -> None:
        super().__init__()
        self.frames = frames
        self.requests = 0

    def render_POST(self, request: Any) -> bytes:
        self.requests += 1
        request.setHeader(b"content-type", b"text/event-stream")
        for frame in self.frames:
            request.write(frame)
        request.finish()
        return NOT_DONE_YET  # type: ignore[no-any-return]


def _messages_stream(port: int, key: str) -> list[tuple[str, dict[str, Any]]]:
    """A raw streamed ``/v1/messages`` call; the (event, data) pairs it received."""
    body = orjson.dumps({"model": "gpt-fake", "stream": True, "max_tokens": 50,
                         "messages": [{"role": "user", "content": "one two three"}]})
    request = (b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"x-api-key: " + key.encode() + b"\r\nanthropic-version: 2023-06-01\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    events = []
    for block in data.split(b"\r\n\r\n", 1)[1].split(b"\n\n"):
        lines = dict(line.split(b": ", 1) for line in block.split(b"\n")
                     if line.startswith((b"event: ", b"data: ")))
        if b"data" in lines:
            events.append((lines.get(b"event", b"").decode(), orjson.loads(lines[b"data"])))
    return events


class StreamEndedEarlyTests(GatewayTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.addCleanup(lambda: ensureDeferred(self.verify_ledger()))

    async def point_primary_at(self, upstream: EndsEarlyUpstream) -> None:
        port = reactor.listenTCP(0, Site(upstream), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        await self.catalog.set(schema.channels, self.channel_id,
                               base_url=f"http://127.0.0.1:{port.getHost().port}")
        await self.catalog.announce()

    async def add_backup(self) -> int:
        backup: int = await self.catalog.channel(self.uc_id, "backup",
                                                 base_url=self.fake.base_url, priority=-1)
        await self.catalog.config(backup, self.model_id)
        await self.catalog.announce()
        return backup

    async def test_ends_with_one_native_error_event_and_bills_what_was_delivered(self) -> None:
        await self.provision()
        upstream = EndsEarlyUpstream([_chunk("part0 "), _chunk("part1 ")])
        await self.point_primary_at(upstream)
        await self.add_backup()  # never tried: the client already has part of the answer
        events = await self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                      "gpt-fake", None)
        payloads = [e[5:].strip() for e in events]
        texts = [orjson.loads(p)["choices"][0]["delta"]["content"] for p in payloads[:2]]
        assert texts == ["part0 ", "part1 "]
        errors = [orjson.loads(p)["error"] for p in payloads[2:] if p != b"[DONE]"]
        assert len(errors) == 1, payloads
        assert errors[0]["type"] == "upstream_error"
        assert payloads[-1] == b"[DONE]"
        assert upstream.requests == 1 and self.fake.request_count == 0
        rows = await self.usage_rows()
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["status"] == 502
        assert row["error_message"] == "upstream stream ended before completion"
        assert row["channel_id"] == self.channel_id
        assert row["output_tokens"] >= 1 and row["input_tokens"] >= 1
        assert row["cost_nanos"] == expected_cost_nanos(row["input_tokens"],
                                                        row["output_tokens"]) > 0
        assert await self.ledger_sum(self.user_id) == -row["cost_nanos"]

    async def test_a_stream_that_ends_before_its_first_event_fails_over(self) -> None:
        await self.provision()
        upstream = EndsEarlyUpstream([])
        await self.point_primary_at(upstream)
        backup = await self.add_backup()
        events = await self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                      "gpt-fake", None)
        payloads = [e[5:].strip() for e in events]
        assert payloads[-1] == b"[DONE]" and not any(b'"error"' in p for p in payloads)
        assert upstream.requests == 1 and self.fake.request_count == 1
        rows = await self.usage_rows()
        assert len(rows) == 1, rows
        assert rows[0]["status"] == 0 and rows[0]["channel_id"] == backup
        assert await self.ledger_sum(self.user_id) == -rows[0]["cost_nanos"]

    async def test_a_messages_stream_ends_with_one_error_event_and_bills_its_usage(self) -> None:
        await self.provision(channel_type="messages")
        upstream = EndsEarlyUpstream(MESSAGES_FRAMES)
        await self.point_primary_at(upstream)
        events = await self.in_thread(_messages_stream, self.port.getHost().port, self.api_key)
        kinds = [kind for kind, _ in events]
        assert kinds == ["message_start", "content_block_start", "content_block_delta", "error"]
        assert events[-1][1]["type"] == "error"
        assert events[-1][1]["error"]["type"] == "api_error"
        rows = await self.usage_rows()
        assert len(rows) == 1, rows
        row = rows[0]
        assert row["status"] == 502
        assert row["error_message"] == "upstream stream ended before completion"
        assert (row["input_tokens"], row["output_tokens"]) == (5, 1)  # the upstream's usage
        assert row["cost_nanos"] == expected_cost_nanos(5, 1)
        assert await self.ledger_sum(self.user_id) == -row["cost_nanos"]
