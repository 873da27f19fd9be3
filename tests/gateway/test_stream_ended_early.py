"""The failure-matrix exit "stream ended before its end marker", end to end: an upstream that
closes its SSE body cleanly without ``data: [DONE]`` (gateway contract §9.4, DESIGN.md "a
failure after the first byte ends the stream with one error event ... billed for what was
delivered"; ``gateway.v1.outcome.StreamEndedEarly``)."""

from __future__ import annotations

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


class EndsEarlyUpstream(Resource):
    """A chat upstream whose streams stop after ``events`` content chunks: the HTTP body ends
    cleanly (chunked terminator), but without ``[DONE]`` and without any error event."""

    isLeaf = True

    def __init__(self, events: int) -> None:
        super().__init__()
        self.events = events
        self.requests = 0

    def render_POST(self, request: Any) -> bytes:
        self.requests += 1
        request.setHeader(b"content-type", b"text/event-stream")
        for i in range(self.events):
            request.write(_chunk(f"part{i} "))
        request.finish()
        return NOT_DONE_YET  # type: ignore[no-any-return]


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
        upstream = EndsEarlyUpstream(events=2)
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
        upstream = EndsEarlyUpstream(events=0)
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
