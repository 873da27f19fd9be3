"""Issue 14 defect 7: an upstream failure is visible to the operator, never to the client.

The upstream here is a real loopback server written for these tests: it answers a chosen status
with a body that echoes the channel key it received and the prompt it was sent -- what a real
provider's "Incorrect API key provided: sk-..." or a verbose 500 may do.  The client gets our
generic 502; the server log, the admin's usage log and the channel's health tell the operator
which channel failed, with what status and why, without the key or the prompt.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import update
from twisted.internet import reactor
from twisted.logger import globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import Site

from gateway.channels.upstream_failure import redacted_excerpt, status_reason
from gateway.store import schema
from tests.gateway.gateway_case import GatewayTestCase

CHANNEL_KEY = "sk-channel-secret-0123456789"
PROMPT = "please keep this prompt private"


class EchoingFailure(Resource):
    """Answers every POST with ``status`` and a body quoting the caller's key and prompt."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.status = 500
        self.calls = 0

    def render_POST(self, request: Any) -> bytes:
        self.calls += 1
        sent = orjson.loads(request.content.read())
        request.setHeader(b"content-type", b"application/json")
        if self.status < 400:
            request.setResponseCode(200)
            return orjson.dumps({
                "id": "x", "object": "chat.completion", "created": 1, "model": sent["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
        request.setResponseCode(self.status)
        key = (request.getHeader(b"authorization") or b"").decode().removeprefix("Bearer ")
        return orjson.dumps({"error": {
            "message": f"upstream exploded; key {key} was used",
            "type": "server_error" if self.status >= 500 else "invalid_request_error",
            "echo": {"messages": sent["messages"]}}})


class UpstreamFailureCase(GatewayTestCase):
    """A provisioned gateway whose channel points at an ``EchoingFailure`` upstream."""

    async def _provision_failing(self, status: int) -> EchoingFailure:
        upstream = EchoingFailure()
        upstream.status = status
        port = reactor.listenTCP(0, Site(upstream), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        await self.provision()
        channels = schema.channels
        await self.ctx.db.transaction(lambda conn: conn.execute(
            update(channels).where(channels.c.id == self.channel_id).values(
                base_url=f"http://127.0.0.1:{port.getHost().port}", api_key=CHANNEL_KEY)))
        await self.catalog.announce()
        return upstream

    def _capture_log(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []

        def observe(event: dict[str, Any]) -> None:
            if event.get("log_namespace") == "gateway.channels.upstream_failure":
                events.append(event)

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        return events

    async def _chat(self) -> Any:
        return await self.call("POST", "/v1/chat/completions", {
            "model": "gpt-fake", "messages": [{"role": "user", "content": PROMPT}]},
            token=self.api_key)

    async def _logs(self, path: str, token: str) -> Any:
        await self.gateway.settler.flush()
        return (await self.call("GET", path, token=token)).json()

    async def _channel(self) -> dict[str, Any]:
        await self.gateway.health.flush()
        response = await self.call("GET", f"/api/channels/{self.channel_id}",
                                   token=self.admin_token)
        assert response.status == 200, response
        found: dict[str, Any] = response.json()
        return found


class UpstreamFailureVisibilityTests(UpstreamFailureCase):
    async def test_upstream_500_is_logged_counted_and_explained_to_the_admin(self) -> None:
        await self._provision_failing(500)
        events = self._capture_log()
        answer = await self._chat()
        # the client: our generic 502, nothing of the upstream body
        assert answer.status == 502, answer
        assert answer.json()["error"]["message"] == "Upstream request failed"
        assert b"exploded" not in answer.body and CHANNEL_KEY.encode() not in answer.body
        # the server log: one line with the channel, the status and a redacted excerpt
        assert len(events) == 1, events
        event = events[0]
        assert event["upstream_status"] == 500 and event["channel_id"] == self.channel_id
        assert event["request_id"]
        assert "upstream exploded" in event["excerpt"]
        assert CHANNEL_KEY not in event["excerpt"] and PROMPT not in event["excerpt"]
        assert f"[{len(PROMPT)} chars]" in event["excerpt"]
        # the admin's usage log: the upstream status and the failure reason
        rows = await self._logs("/api/logs", self.admin_token)
        assert len(rows) == 1
        assert rows[0]["status"] == 502 and rows[0]["error_message"] == "Upstream request failed"
        assert rows[0]["upstream_status"] == 500
        reason = rows[0]["failure_reason"]
        assert "HTTP 500 (upstream server error)" in reason and "exploded" in reason
        assert f"channel {self.channel_id}" in reason and CHANNEL_KEY not in reason
        assert rows[0]["request_id"] == event["request_id"]
        # the user's own view of the same row carries none of it
        mine = await self._logs("/api/user/logs", self.user_token)
        assert "upstream_status" not in mine[0] and "failure_reason" not in mine[0]
        # the channel: its failure count and reason, persisted
        channel = await self._channel()
        assert channel["consecutive_failures"] == 1
        assert channel["last_failure_reason"].startswith("HTTP 500 (upstream server error)")
        assert channel["last_failure_at"] is not None

    async def test_bad_channel_key_is_told_apart_from_an_outage(self) -> None:
        await self._provision_failing(401)
        events = self._capture_log()
        answer = await self._chat()
        assert answer.status == 502, answer
        assert events[0]["upstream_status"] == 401
        assert "[channel key]" in events[0]["excerpt"]
        rows = await self._logs("/api/logs", self.admin_token)
        assert rows[0]["upstream_status"] == 401
        assert "HTTP 401 (channel credential rejected)" in rows[0]["failure_reason"]
        channel = await self._channel()
        assert channel["consecutive_failures"] == 1
        assert "channel credential rejected" in channel["last_failure_reason"]
        assert channel["auto_disabled_at"] is not None

    async def test_counts_add_up_and_a_success_clears_them(self) -> None:
        upstream = await self._provision_failing(503)
        for _ in range(2):
            assert (await self._chat()).status == 502
        assert (await self._channel())["consecutive_failures"] == 2
        upstream.status = 200
        self.clock.advance(60)  # past any cooldown
        assert (await self._chat()).status == 200
        channel = await self._channel()
        assert channel["consecutive_failures"] == 0
        # the last failure stays on record for the operator
        assert channel["last_failure_reason"].startswith("HTTP 503")
        assert upstream.calls == 3

    async def test_an_unreachable_upstream_is_reported_without_a_status(self) -> None:
        await self.provision()
        channels = schema.channels
        await self.ctx.db.transaction(lambda conn: conn.execute(
            update(channels).where(channels.c.id == self.channel_id).values(
                base_url="http://127.0.0.1:9")))
        await self.catalog.announce()
        events = self._capture_log()
        assert (await self._chat()).status == 502
        assert events and "detail" in events[0]
        rows = await self._logs("/api/logs", self.admin_token)
        assert rows[0]["upstream_status"] is None
        assert "no upstream answer" in rows[0]["failure_reason"]
        assert (await self._channel())["consecutive_failures"] == 1


class RedactionTests(SynchronousTestCase):
    def test_excerpt_reduces_text_fields_and_masks_keys(self) -> None:
        body = orjson.dumps({"error": {
            "message": "bad key sk-abcdef123456 and Bearer tok_99999999 (acct 7)",
            "prompt": "secret words"}})
        excerpt = redacted_excerpt(body, ("tok_99999999",))
        assert "sk-abcdef123456" not in excerpt and "tok_99999999" not in excerpt
        assert "secret words" not in excerpt and "[12 chars]" in excerpt
        assert "bad key" in excerpt and "(acct 7)" in excerpt

    def test_excerpt_of_a_non_json_body_is_cut_at_1000_characters(self) -> None:
        excerpt = redacted_excerpt(b"<html>" + b"x" * 5000)
        assert excerpt.startswith("<html>") and len(excerpt) == 1001

    def test_reason_names_the_status_meaning(self) -> None:
        assert status_reason(429, "") == "HTTP 429 (rate limited by upstream)"
        assert status_reason(403, "no").startswith("HTTP 403 (channel credential rejected): no")
