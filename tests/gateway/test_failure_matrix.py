"""Every failure exit of a relayed call: what the client sees, that the upstream socket is
closed, and that the user is charged exactly once for exactly what was consumed."""

from __future__ import annotations

import socket

import orjson
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater

from tests.gateway.gateway_case import GatewayTestCase, expected_cost_nanos


def _raw_stream(port: int, key: str, model: str, read_events: int | None,
                timeout: float = 10.0) -> list[bytes]:
    """A raw HTTP client in a thread: POST a streamed chat call, read ``read_events`` SSE
    events (all when None), then close the socket."""
    body = orjson.dumps({"model": model, "stream": True,
                         "messages": [{"role": "user", "content": "one two three"}]})
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               b"Authorization: Bearer " + key.encode() + b"\r\n"
               b"Content-Type: application/json\r\nContent-Length: "
               + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock.sendall(request)
    data = b""
    events: list[bytes] = []
    try:
        while read_events is None or len(events) < read_events:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            events = [line for line in data.split(b"\n") if line.startswith(b"data:")]
    finally:
        sock.close()
    return events if read_events is None else events[:read_events]


async def _until(predicate: object, seconds: float = 5.0) -> None:
    """Poll a condition on the real reactor (bounded); fails the test when it never holds."""
    waited = 0.0
    while not predicate():  # type: ignore[operator]
        if waited >= seconds:
            raise AssertionError("condition not reached in time")
        await deferLater(reactor, 0.02, lambda: None)
        waited += 0.02


class FailureMatrixTests(GatewayTestCase):
    def setUp(self) -> None:
        super().setUp()
        # every failure exit leaves balanced books (``lockgate-admin verify-ledger``'s check)
        self.addCleanup(lambda: ensureDeferred(self.verify_ledger()))

    async def one_charge(self) -> dict:
        rows = await self.usage_rows()
        assert len(rows) == 1, rows
        assert await self.ledger_sum(self.user_id) == -rows[0]["cost_nanos"]
        return rows[0]

    async def add_backup(self) -> int:
        """A second channel on the same upstream, tried after the primary; returns its id."""
        backup: int = await self.catalog.channel(self.uc_id, "backup",
                                                 base_url=self.fake.base_url, priority=0)
        await self.catalog.config(backup, self.model_id)
        await self.catalog.announce()
        return backup

    async def served_by_backup(self, failing_model: str) -> int:
        """The primary answers with an error before the first byte; the backup serves, the
        client sees only the answer, and one charge names the backup. Returns its id."""
        await self.provision(upstream_model=failing_model)
        backup = await self.add_backup()
        client = self.openai_client()
        reply = await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                     messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == "tok0 tok1 tok2 "
        assert [r.body["model"] for r in self.fake.requests] == [failing_model, "gpt-fake"]
        row = await self.one_charge()
        assert row["channel_id"] == backup and row["status"] == 0
        return backup

    async def test_upstream_503_before_first_byte_fails_over(self) -> None:
        await self.served_by_backup("gpt-fake+fail-503")

    async def test_upstream_401_disables_the_channel_and_fails_over(self) -> None:
        await self.served_by_backup("gpt-fake+fail-401")
        assert not self.gateway.health.is_available(self.channel_id)
        # the broken channel is not tried again: the next call goes straight to the backup
        await self.in_thread(self.openai_client().chat.completions.create, model="gpt-fake",
                             messages=[{"role": "user", "content": "again"}])
        assert [r.body["model"] for r in self.fake.requests][2:] == ["gpt-fake"]

    async def test_upstream_4xx_is_not_retried_and_not_charged(self) -> None:
        await self.provision(upstream_model="gpt-fake+fail-400")
        await self.add_backup()
        import openai
        client = self.openai_client()
        with self.assertRaises(openai.BadRequestError):
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "hi"}])
        assert self.fake.request_count == 1
        row = await self.one_charge()
        assert row["cost_nanos"] == 0 and row["status"] == 400

    async def test_error_mid_stream_ends_with_error_event_and_bills_delivered(self) -> None:
        await self.provision(upstream_model="gpt-fake+error-after-2+no-usage")
        events = await self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                      "gpt-fake", None)
        payloads = [e[5:].strip() for e in events]
        assert b'"error"' in payloads[-2] or b'"error"' in payloads[-1]
        row = await self.one_charge()
        assert row["status"] == 502 and row["output_tokens"] >= 1 and row["cost_nanos"] > 0
        # the upstream body ended cleanly, so its keep-alive connection may stay pooled

    async def test_upstream_stall_hits_idle_timeout_and_closes_socket(self) -> None:
        await self.provision(upstream_model="gpt-fake+stall-after-2")
        result = self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                "gpt-fake", None)
        await _until(lambda: self.fake.request_count == 1 and self.fake.open_connections == 1)
        await deferLater(reactor, 0.1, lambda: None)
        self.clock.advance(self.gateway.timeouts.stream_idle + 1)
        events = await result
        assert any(b'"error"' in e for e in events)
        await _until(lambda: self.fake.open_connections == 0)
        row = await self.one_charge()
        assert row["status"] == 502 and row["cost_nanos"] > 0

    async def test_client_disconnect_closes_upstream_and_bills_consumed(self) -> None:
        await self.provision(upstream_model="gpt-fake+chunks-200+pace-0.02")
        events = await self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                      "gpt-fake", 3)
        assert len(events) == 3
        await _until(lambda: self.fake.open_connections == 0, seconds=1.0)
        row = await self.one_charge()
        assert row["status"] == 499
        assert 1 <= row["output_tokens"] < 200
        assert row["cost_nanos"] > 0

    async def test_client_gone_before_upstream_headers_closes_upstream_and_bills_nothing(
            self) -> None:
        await self.provision(upstream_model="gpt-fake+slow-first-byte-30")
        result = self.in_thread(_raw_stream, self.port.getHost().port, self.api_key,
                                "gpt-fake", 1, 0.5)
        await _until(lambda: self.fake.request_count == 1 and self.fake.open_connections == 1)
        with self.assertRaises(socket.timeout):
            await result  # the client gives up and closes its socket before any header
        await _until(lambda: self.fake.open_connections == 0, seconds=1.0)
        row = await self.one_charge()
        assert row["status"] == 499 and row["cost_nanos"] == 0

    async def test_missing_usage_is_estimated_and_billed(self) -> None:
        await self.provision(upstream_model="gpt-fake+no-usage")
        client = self.openai_client()
        reply = await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                     messages=[{"role": "user", "content": "hello world"}])
        assert reply.choices[0].message.content
        row = await self.one_charge()
        assert row["input_tokens"] >= 1 and row["output_tokens"] >= 1
        assert row["cost_nanos"] == expected_cost_nanos(row["input_tokens"],
                                                        row["output_tokens"])

    async def test_connect_failure_fails_over_then_503_when_all_fail(self) -> None:
        await self.provision()
        await self.catalog.set(__import__("gateway.store.schema", fromlist=["x"]).channels,
                               self.channel_id, base_url="http://127.0.0.1:9")
        import openai
        client = self.openai_client()
        with self.assertRaises(openai.APIStatusError) as caught:
            await self.in_thread(client.chat.completions.create, model="gpt-fake",
                                 messages=[{"role": "user", "content": "hi"}])
        assert caught.exception.status_code == 502
        row = await self.one_charge()
        assert row["cost_nanos"] == 0
