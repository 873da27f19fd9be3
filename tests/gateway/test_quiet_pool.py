"""Upstream connections leave no "Starting factory" / "Stopping factory" lines in the log."""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import TestCase

from gateway.channels.http import UpstreamClient
from tests.support.upstream import FakeUpstream


class QuietPoolTests(TestCase):
    async def test_an_upstream_call_logs_no_factory_lines(self) -> None:
        fake = FakeUpstream.start(reactor)
        self.addCleanup(fake.stop)
        lines: list[str] = []

        def observe(event: dict[str, Any]) -> None:
            lines.append(formatEvent(event))

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        client = UpstreamClient(reactor)
        self.addCleanup(client.close)
        response = await client.request(
            b"GET", fake.base_url + "/v1/models", {b"authorization": [b"Bearer k"]}, b"",
            first_byte_timeout=10)
        await response.read_all(1 << 20)
        assert response.code == 200
        await client.close()
        assert not [line for line in lines if "factory" in line.lower()], lines
