"""A bench-only trace of where each /v1 request's time goes, and what else ran meanwhile.

Why: a c=1 p99 a few milliseconds above the median says nothing about its cause.  With
``LOCKGATE_LATENCY_TRACE=<file>`` in the environment, the process records, per metered call,
the clock at each step (call created -> authenticated -> reserved -> upstream request sent ->
response head -> answered -> settlement queued, with the reactor thread's CPU time at each),
and beside them everything that can take the core or the GIL from a request: the functions
timers and worker threads hand to the reactor (their duration), database transactions on the
database thread (wall and that thread's CPU time), garbage collections and access-log writes.
It is written as JSON to ``<file>`` when the process stops; ``bench/p99_trace.py`` reads it.

Off by default and free when off: nothing is wrapped unless the variable is set.  On, the
wrappers are installed on the classes and the reactor once, at start-up; they cost a few
microseconds per call, which the trace's own figures include (both the slow and the median
requests pay them).
"""

from __future__ import annotations

import functools
import gc
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from twisted.logger import Logger

log = Logger()

ENV = "LOCKGATE_LATENCY_TRACE"
#: set too (any value) to keep what the collector frees and count it by type at the end
#: (``gc.DEBUG_SAVEALL``: the process then never frees cyclic garbage -- short runs only)
GARBAGE_ENV = "LOCKGATE_LATENCY_TRACE_GARBAGE"
#: the steps of a call, in order (``created`` is the call object's construction: the request
#: is parsed and routed to its handler)
STEPS = ("created", "authenticated", "reserved", "upstream_sent", "response_head", "answered",
         "settlement_queued")
#: events shorter than this are counted but not kept one by one (seconds)
KEEP_OVER = 20e-6


def _name(fn: Any) -> str:
    inner = getattr(fn, "func", fn)  # functools.partial
    if type(inner).__name__ == "LoopingCall":
        inner = inner.f  # a LoopingCall's tick: name what it runs
    owner = getattr(inner, "__self__", None)
    qualname = getattr(inner, "__qualname__", None) or type(inner).__name__
    module = getattr(inner, "__module__", None) or type(owner).__module__
    return f"{module}.{qualname}"


class LatencyTrace:
    """What the wrappers record; ``dump`` writes it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.calls: list[dict[str, Any]] = []
        #: (kind, name, start, duration[, cpu]) of timers, thread results, transactions, GCs
        self.events: list[tuple[Any, ...]] = []
        self.short: dict[str, list[float]] = {}
        self._gc_started = 0.0
        self.reactor_thread = threading.get_ident()

    def event(self, kind: str, name: str, start: float, duration: float,
              cpu: float | None = None) -> None:
        if duration >= KEEP_OVER:
            self.events.append((kind, name, start, duration, cpu))
            return
        tally = self.short.setdefault(f"{kind} {name}", [0, 0.0])
        tally[0] += 1
        tally[1] += duration

    def timed(self, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        name = _name(fn)

        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.event(kind, name, start, time.perf_counter() - start)

        return run

    def on_gc(self, phase: str, info: Mapping[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        thread = "reactor" if threading.get_ident() == self.reactor_thread else "worker"
        self.event("gc", f"generation {info.get('generation')} on the {thread} thread, "
                   f"{info.get('collected')} collected", self._gc_started,
                   time.perf_counter() - self._gc_started)

    def dump(self) -> None:
        garbage: dict[str, int] = {}
        for thing in gc.garbage:
            name = f"{type(thing).__module__}.{type(thing).__qualname__}"
            if callable(thing) and hasattr(thing, "__qualname__"):
                name += f" {getattr(thing, '__module__', '')}.{thing.__qualname__}"
            garbage[name] = garbage.get(name, 0) + 1
        with open(self.path, "w") as out:
            json.dump({"steps": STEPS, "calls": self.calls, "events": self.events,
                       "short": self.short, "switch_interval": _switch_interval(),
                       "cyclic_garbage": dict(sorted(garbage.items(),
                                                     key=lambda kv: -kv[1])[:40])}, out)


def _switch_interval() -> float:
    import sys

    return sys.getswitchinterval()


def _mark(call: Any, step: str, *, scheduler: bool = False) -> None:
    marks = call.__dict__.get("_trace_marks") if hasattr(call, "__dict__") else None
    if marks is not None:
        marks[step] = _now(scheduler)


def _now(scheduler: bool) -> tuple[float, ...]:
    """(clock, this thread's CPU time) and with ``scheduler`` also the kernel's view of this
    thread: seconds it waited runnable for a CPU, and its voluntary context switches (a wait
    for the GIL is one; so is each wait in ``epoll``)."""
    if not scheduler:
        return (time.perf_counter(), time.thread_time())
    with open("/proc/thread-self/schedstat", "rb") as stat:
        waited = int(stat.read().split()[1]) / 1e9
    with open("/proc/thread-self/status", "rb") as status:
        switches = next(int(line.split()[1]) for line in status
                        if line.startswith(b"voluntary_ctxt_switches"))
    return (time.perf_counter(), time.thread_time(), waited, switches)


def install(environ: Mapping[str, str], reactor: Any) -> LatencyTrace | None:
    """Start tracing when ``LOCKGATE_LATENCY_TRACE`` names a file; None (nothing done) when
    it is not set."""
    path = environ.get(ENV, "").strip()
    if not path:
        return None
    trace = LatencyTrace(path)
    _wrap_calls(trace)
    _wrap_reactor(trace, reactor)
    _wrap_database(trace)
    _wrap_access_log(trace)
    gc.callbacks.append(trace.on_gc)
    if environ.get(GARBAGE_ENV):
        gc.set_debug(gc.DEBUG_SAVEALL)
    reactor.addSystemEventTrigger("before", "shutdown", trace.dump)
    log.info("latency trace on: written to {path} at shutdown", path=path)
    return trace


def _wrap_calls(trace: LatencyTrace) -> None:
    from gateway.v1.call import GatewayCall

    created = GatewayCall.__init__

    @functools.wraps(created)
    def init(self: Any, ctx: Any, request: Any, endpoint: str) -> None:
        self._trace_marks = {"created": _now(True)}
        created(self, ctx, request, endpoint)

        def answered(result: Any) -> Any:
            _mark(self, "answered", scheduler=True)
            return result

        request.notifyFinish().addBoth(answered)

    GatewayCall.__init__ = init  # type: ignore[method-assign]
    for method, step in (("_caller", "authenticated"), ("_admit", "reserved"),
                         ("_open_upstream", "response_head")):
        _after(GatewayCall, method, step, sent=method == "_open_upstream")
    settle = GatewayCall._settle

    @functools.wraps(settle)
    def settled(self: Any, outcome: Any) -> None:
        settle(self, outcome)
        _mark(self, "settlement_queued")
        marks = self.__dict__.get("_trace_marks")
        if marks is not None:
            trace.calls.append({"status": outcome.status, "endpoint": self.log.endpoint,
                                "marks": marks})

    GatewayCall._settle = settled  # type: ignore[method-assign]


def _after(cls: type, method: str, step: str, *, sent: bool) -> None:
    original = getattr(cls, method)

    @functools.wraps(original)
    async def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        if sent:
            _mark(self, "upstream_sent")
        result = await original(self, *args, **kwargs)
        _mark(self, step)
        return result

    setattr(cls, method, wrapped)


def _wrap_reactor(trace: LatencyTrace, reactor: Any) -> None:
    call_later = reactor.callLater
    from_thread = reactor.callFromThread

    def traced_call_later(delay: float, fn: Callable[..., Any], *args: Any,
                          **kwargs: Any) -> Any:
        return call_later(delay, trace.timed("timer", fn), *args, **kwargs)

    def traced_from_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return from_thread(trace.timed("from_thread", fn), *args, **kwargs)

    reactor.callLater = traced_call_later
    reactor.callFromThread = traced_from_thread


def _wrap_database(trace: LatencyTrace) -> None:
    from gateway.store.pool import DBRunner

    for method in ("_in_transaction", "_in_driver_transaction"):
        original = getattr(DBRunner, method)

        def wrapped(self: Any, fn: Callable[..., Any], args: tuple, *rest: Any,
                    _original: Any = original) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return _original(self, fn, args, *rest)
            finally:
                if threading.get_ident() != trace.reactor_thread:
                    trace.event("transaction", _name(fn), start, time.perf_counter() - start,
                                time.thread_time() - cpu)

        setattr(DBRunner, method, wrapped)


def _wrap_access_log(trace: LatencyTrace) -> None:
    from tap.access_log import BufferedAccessLog

    flush = BufferedAccessLog.flush

    def traced_flush(self: BufferedAccessLog) -> None:
        start = time.perf_counter()
        flush(self)
        trace.event("access_log", "flush", start, time.perf_counter() - start)

    BufferedAccessLog.flush = traced_flush  # type: ignore[method-assign]
