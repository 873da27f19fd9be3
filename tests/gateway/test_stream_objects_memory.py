"""What every open stream keeps for its whole life is slotted: no per-object ``__dict__``.

A process holds 10,000 open streams (issue 22); each keeps a ``StreamWriter``, an
``EventRelay`` (or ``BytesRelay``) and an ``UpstreamResponse`` for as long as it lasts.  The
sizes are measured with tracemalloc over a thousand of them.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase
from twisted.web._newclient import Response
from twisted.web.http_headers import Headers
from twisted.web.test.requesthelper import DummyChannel, DummyRequest

from gateway.channels.http import UpstreamResponse
from gateway.channels.relay import BytesRelay, EventRelay, StreamWriter

COUNT = 1000


def open_request() -> DummyRequest:
    request = DummyRequest([b"v1"])
    request.channel = DummyChannel()
    return request


def upstream_response(clock: Clock) -> UpstreamResponse:
    answer = Response._construct((b"HTTP", 1, 1), 200, b"OK",
                                 Headers({b"content-type": [b"text/event-stream"]}), None, None)
    return UpstreamResponse(answer, clock)


class StreamObjectsTests(TestCase):
    def test_the_objects_a_stream_keeps_have_no_dict(self) -> None:
        clock = Clock()
        writer = StreamWriter(open_request(), clock)
        source = upstream_response(clock)
        for kept in (writer, source, EventRelay(writer, source, lambda event: None),
                     BytesRelay(writer, source)):
            assert not hasattr(kept, "__dict__"), type(kept).__name__

    def test_writer_relay_and_response_of_a_stream_take_under_a_kib(self) -> None:
        clock = Clock()
        requests = [open_request() for _ in range(COUNT)]
        kept: list[Any] = []
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for request in requests:
                writer = StreamWriter(request, clock)
                source = upstream_response(clock)
                kept.append(EventRelay(writer, source, lambda event: None))
            each = (tracemalloc.get_traced_memory()[0] - before) / COUNT
        finally:
            tracemalloc.stop()
        # the response's Twisted object, its headers and the writer's notifyFinish Deferred
        # are part of the figure; the slotted objects themselves are ~100-200 bytes each
        assert each < 2600, each
