"""A bench-only timeline of stream starts: when each /v1 request was read, started, done
starting and got its first byte out, and when the upstream connections and answers moved.

Why (issue 22, goal 4): with 500 streams sent at once every stream got its first byte at
about the same moment (TTFB p50 ~ p99).  The reading was that the reactor ran every request's
whole start from one ``epoll`` batch before it polled again, so no connect completion,
upstream answer or chunk was handled until all 500 had started.  This trace shows it: every
mark carries the reactor turn (one ``doIteration``: an ``epoll`` pass and its handlers) it
happened in, beside the clock; when each turn began is kept too (with the reactor thread's
CPU time, which tells work from waiting for the core).

With ``LOCKGATE_STREAM_TRACE=<file>`` the process records, per /v1 request, ``received``
(head and body in), ``dispatched`` (its resource starts rendering), ``start_done`` (the
render returned: the synchronous part of the start; after ``first_byte`` for an answer made
in the render) and ``first_byte`` (the first write of its answer); and, as one timeline,
each upstream ``connect`` begun, upstream request ``written`` and upstream ``head`` parsed.
It writes JSON to ``<file>`` when the process stops; ``bench/stream_trace.py`` reads it.

Off by default and free when off: nothing is wrapped unless the variable is set.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Mapping
from typing import Any

from twisted.logger import Logger

log = Logger()

ENV = "LOCKGATE_STREAM_TRACE"
#: a request's marks, in order
MARKS = ("received", "dispatched", "start_done", "first_byte")
#: the upstream timeline's kinds
UPSTREAM = ("connect", "written", "head")


class StreamStartTrace:
    """The marks; ``dump`` writes them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.turn = 0
        #: id(request) -> its marks, while it has not written yet
        self.open: dict[int, dict[str, tuple[float, int]]] = {}
        self.requests: list[dict[str, tuple[float, int]]] = []
        self.upstream: list[tuple[str, float, int]] = []
        #: (clock, the reactor thread's CPU time) as each turn began
        self.turn_starts: list[tuple[float, float]] = []

    def now(self) -> tuple[float, int]:
        return (time.perf_counter(), self.turn)

    def mark(self, request: Any, step: str) -> None:
        marks = self.open.get(id(request))
        if marks is not None and step not in marks:
            marks[step] = self.now()

    def close(self, request: Any) -> None:
        marks = self.open.pop(id(request), None)
        if marks is not None:
            self.requests.append(marks)

    def dump(self) -> None:
        self.requests.extend(self.open.values())
        self.open.clear()
        with open(self.path, "w") as out:
            json.dump({"marks": MARKS, "requests": self.requests, "upstream": self.upstream,
                       "turns": self.turn, "turn_starts": self.turn_starts}, out)


def install(environ: Mapping[str, str], reactor: Any) -> StreamStartTrace | None:
    """Start tracing when ``LOCKGATE_STREAM_TRACE`` names a file; None (nothing done) when
    it is not set."""
    path = environ.get(ENV, "").strip()
    if not path:
        return None
    trace = StreamStartTrace(path)
    _count_turns(trace, reactor)
    _wrap_requests(trace)
    _wrap_upstream(trace)
    reactor.addSystemEventTrigger("before", "shutdown", trace.dump)
    log.info("stream start trace on: written to {path} at shutdown", path=path)
    return trace


def _count_turns(trace: StreamStartTrace, reactor: Any) -> None:
    iterate = reactor.doIteration

    starts = trace.turn_starts

    def counted(timeout: float | None) -> None:
        trace.turn += 1
        starts.append((time.perf_counter(), time.thread_time()))
        iterate(timeout)

    reactor.doIteration = counted


def _wrap_requests(trace: StreamStartTrace) -> None:
    from tap.http_request import LockgateRequest

    received = LockgateRequest.requestReceived
    render = LockgateRequest.render
    write = LockgateRequest.write
    lost = LockgateRequest.connectionLost

    @functools.wraps(received)
    def traced_received(self: Any, command: bytes, path: bytes, version: bytes) -> None:
        if path.startswith(b"/v1"):
            trace.open[id(self)] = {"received": trace.now()}
        received(self, command, path, version)

    @functools.wraps(render)
    def traced_render(self: Any, resource: Any) -> None:
        trace.mark(self, "dispatched")
        marks = trace.open.get(id(self))  # still this request's after an answer in render
        render(self, resource)
        if marks is not None:
            marks["start_done"] = trace.now()

    @functools.wraps(write)
    def traced_write(self: Any, data: bytes) -> None:
        if id(self) in trace.open:
            trace.mark(self, "first_byte")
            trace.close(self)
        write(self, data)

    @functools.wraps(lost)
    def traced_lost(self: Any, reason: Any) -> None:
        trace.close(self)
        lost(self, reason)

    LockgateRequest.requestReceived = traced_received  # type: ignore[method-assign]
    LockgateRequest.render = traced_render  # type: ignore[method-assign]
    LockgateRequest.write = traced_write  # type: ignore[method-assign]
    LockgateRequest.connectionLost = traced_lost  # type: ignore[method-assign]


def _wrap_upstream(trace: StreamStartTrace) -> None:
    from gateway.channels.lean_connection import LeanConnection
    from gateway.channels.lean_pool import LeanPool

    for cls, method, kind in ((LeanPool, "_connect", "connect"),
                              (LeanConnection, "start", "written"),
                              (LeanConnection, "on_headers_complete", "head")):
        original = getattr(cls, method)

        def traced(self: Any, *args: Any, _original: Any = original, _kind: str = kind) -> Any:
            trace.upstream.append((_kind, *trace.now()))
            return _original(self, *args)

        setattr(cls, method, functools.wraps(original)(traced))
