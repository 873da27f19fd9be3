"""The drain's pieces on their own: the handler-task count, the deadline, the refusals.

The process-level behaviour is in ``test_drain.py``; these pin the small contracts it rests
on with a ``Clock`` (no real time): idle waiters fire only when the last handler task ended,
``within`` fires at the first of the two, and a refusal speaks each family's shape.
"""

from __future__ import annotations

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web.test.requesthelper import DummyRequest

from gateway.v1.calls_in_flight import CallsInFlight
from tap.drain import DrainingRefusal, InFlight, within
from tap.health import DrainingReadyz, Readyz


def _request(path: bytes) -> DummyRequest:
    request = DummyRequest(path.lstrip(b"/").split(b"/"))
    request.path = path
    return request


class _Call:
    def __init__(self) -> None:
        self.cut = 0

    def cut_for_shutdown(self) -> None:
        self.cut += 1


class CallsInFlightTests(TestCase):
    def test_idle_fires_after_the_last_task_not_after_the_first(self) -> None:
        calls = CallsInFlight()
        calls.started()
        calls.started()
        idle = calls.idle()
        calls.ended()
        assert not idle.called and calls.count == 1
        calls.ended()
        assert idle.called and calls.count == 0
        assert self.successResultOf(calls.idle()) is None

    def test_cut_all_reaches_every_open_call_once(self) -> None:
        calls = CallsInFlight()
        a, b, ended = _Call(), _Call(), _Call()
        for call in (a, b, ended):
            calls.opened(call)
        calls.closed(ended)
        assert calls.cut_all() == 2
        assert (a.cut, b.cut, ended.cut) == (1, 1, 0)


class WithinTests(TestCase):
    def test_fires_at_the_deadline_when_nothing_else_happens(self) -> None:
        clock = Clock()
        waiting: Deferred[None] = Deferred()
        out = within(waiting, clock, 10)
        clock.advance(9.9)
        assert not out.called
        clock.advance(0.1)
        assert out.called
        waiting.callback(None)  # a late result changes nothing

    def test_fires_at_once_when_the_waited_for_thing_happens(self) -> None:
        clock = Clock()
        in_flight = InFlight()
        in_flight.started()
        out = in_flight.drained(clock, 10)
        clock.advance(1)
        in_flight.finished()
        assert out.called
        assert not clock.getDelayedCalls()


class RefusalTests(TestCase):
    def render(self, resource: object, path: bytes) -> tuple[DummyRequest, dict[str, object]]:
        request = _request(path)
        body = resource.render(request)  # type: ignore[attr-defined]
        return request, orjson.loads(body)

    def header(self, request: DummyRequest, name: bytes) -> bytes:
        return request.responseHeaders.getRawHeaders(name)[0]

    def test_gateway_routes_answer_in_their_family_shape(self) -> None:
        request, body = self.render(DrainingRefusal(), b"/v1/chat/completions")
        assert request.responseCode == 503
        assert body["error"]["type"] == "service_unavailable"  # type: ignore[index]
        assert self.header(request, b"retry-after") == b"1"
        assert self.header(request, b"connection") == b"close"
        request, body = self.render(DrainingRefusal(), b"/v1/messages")
        assert body["type"] == "error" and body["error"]["type"] == "overloaded_error", body

    def test_console_routes_answer_in_the_console_shape(self) -> None:
        request, body = self.render(DrainingRefusal(), b"/api/user/me")
        assert request.responseCode == 503
        assert body == {"error": "The server is shutting down; retry the request",
                        "type": "service_unavailable"}
        assert self.header(request, b"connection") == b"close"

    def test_readyz_says_draining(self) -> None:
        request = _request(b"/readyz")
        request.method = b"GET"
        body = DrainingReadyz().render(request)
        assert request.responseCode == 503
        assert orjson.loads(body) == {"status": "draining"}
        assert self.header(request, b"cache-control") == b"no-store"


class HungDatabase:
    """A database runner whose transactions never come back (a stalled server)."""

    def transaction(self, fn: object, *args: object) -> Deferred[object]:
        return Deferred()


class ReadinessDeadlineTests(TestCase):
    def test_a_probe_that_cannot_finish_in_two_seconds_answers_503(self) -> None:
        clock = Clock()
        request = _request(b"/readyz")
        request.method = b"GET"
        readyz = Readyz(HungDatabase(), None, clock)  # type: ignore[arg-type]
        readyz.render(request)
        clock.advance(1.9)
        assert not request.finished
        clock.advance(0.2)
        assert request.finished and request.responseCode == 503
        assert orjson.loads(b"".join(request.written)) == {"status": "database unreachable"}
