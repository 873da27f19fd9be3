"""``--log-format json``: one JSON object per event, the request id on the lines a call causes."""

from __future__ import annotations

import io
from typing import Any

import orjson
from twisted.internet import reactor
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger, LogPublisher, globalLogPublisher
from twisted.trial.unittest import TestCase

from gateway.observability.log_context import REQUEST_ID
from tap.json_log import json_observer
from tests.gateway.test_upstream_failures import UpstreamFailureCase


def _lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


class JsonObserverTests(TestCase):
    async def test_events_of_a_call_carry_its_request_id_across_reactor_turns(self) -> None:
        out = io.StringIO()
        publisher = LogPublisher(json_observer(out))
        log = Logger(namespace="test.call", observer=publisher)

        async def call(request_id: str) -> None:
            REQUEST_ID.set(request_id)
            log.info("started {n}", n=1)
            await deferLater(reactor, 0.01, lambda: None)  # another reactor turn
            log.warn("upstream said {status}", status=500)

        await ensureDeferred(call("req-a"))
        # the context ends with the call: later lines carry no request id
        log.info("between calls")
        await ensureDeferred(call("req-b"))
        events = _lines(out)
        assert [e.get("request_id") for e in events] == ["req-a", "req-a", None, "req-b", "req-b"]
        assert events[1]["status"] == 500 and events[1]["log_format"] == "upstream said {status}"
        assert events[1]["log_level"]["name"] == "warn"

    def test_an_explicit_request_id_is_kept(self) -> None:
        out = io.StringIO()
        Logger(observer=LogPublisher(json_observer(out))).info("x {request_id}",
                                                              request_id="mine")
        assert _lines(out)[0]["request_id"] == "mine"


class GatewayCallLogTests(UpstreamFailureCase):
    """The real gateway: its call's context holds the request id when it logs."""

    async def test_log_lines_of_a_failed_call_are_json_with_its_request_id(self) -> None:
        await self._provision_failing(500)
        out = io.StringIO()
        observer = json_observer(out)
        seen_in_context: list[str | None] = []

        def observe(event: dict[str, Any]) -> None:
            if event.get("log_namespace") == "gateway.channels.upstream_failure":
                seen_in_context.append(REQUEST_ID.get())
                observer(event)

        globalLogPublisher.addObserver(observe)
        self.addCleanup(globalLogPublisher.removeObserver, observe)
        assert (await self._chat()).status == 502
        [row] = await self._logs("/api/logs", self.admin_token)
        [event] = _lines(out)
        assert seen_in_context == [row["request_id"]]
        assert event["request_id"] == row["request_id"] and event["upstream_status"] == 500
