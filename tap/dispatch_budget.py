"""At most N new /v1 requests start per reactor turn; the rest wait in one FIFO.

Why (issue 22, goal 4): the reactor reads every readable socket of one ``epoll`` batch before
it polls again.  When 500 clients send a streaming request at once, all 500 arrive in one
batch, and every request's whole start (auth, limits, routing, reservation, opening the
upstream connection: ~0.6 ms of CPU each) ran before the reactor looked at a single connect
completion or upstream answer.  Every stream then got its first byte after *all* the starts,
and every stream already running waited that long for its next chunk.

With a budget, a request whose head and body are in is started at once while fewer than
``per_turn`` requests were started this turn; otherwise it waits in a FIFO shared by all
connections.  A zero-delay timer (which Twisted runs after the next ``epoll`` pass) starts
the next ``per_turn`` of them, so connect completions, upstream answers and running streams'
chunks are served between two slices of a burst.

A fixed count alone starves starts when the reactor is saturated: with thousands of streams
running, one turn's other work (their chunks) grows to tens of milliseconds, so N starts per
turn became a trickle (9,900 slow streams: 2,402 had started after a minute; without a
budget, all of them).  So a turn that begins with requests still waiting may also spend as
long on starts as the reactor spent on everything else since the previous turn: when both
sides are busy, starts get at least half of the core, and the count only bounds a burst
on an otherwise quiet reactor.

Order and accounting:

- FIFO across connections; a connection's own requests are already in order (twisted.web
  dispatches its next pipelined request only once the one before it is answered).
- Each queued request is started exactly once, or dropped once when its client hangs up
  before its turn (it never reached a resource: nothing to release but the queue entry).
- A queued request counts as in flight (``holds``: the drain's ``InFlight``), so a drain waits
  for it; started while draining, it gets the drain's 503 from the site, not a silent close.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger

log = Logger()

#: the default: ~5 ms of a stream start's CPU on this project's bench machine per turn
DEFAULT_PER_TURN = 8


class Holds(Protocol):
    """What counts the requests a drain must wait for (``tap.drain.InFlight``)."""

    def started(self) -> None: ...

    def finished(self, _ignored: Any = None) -> None: ...


class DispatchBudget:
    """The per-turn start budget and the FIFO of requests waiting for a later turn."""

    def __init__(self, clock: IReactorTime, per_turn: int, holds: Holds | None = None, *,
                 now: Callable[[], float] = time.thread_time) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be at least 1")
        self._clock = clock
        self.per_turn = per_turn
        self._holds = holds
        #: the fair share's clock: the reactor thread's CPU time, so that time the process
        #: spent preempted on a busy machine is not taken for the reactor's other work
        self._now = now
        #: when the last turn that left requests waiting began, and what its starts took:
        #: the time between it and the next turn is the reactor's other work
        self._last_began: float | None = None
        self._last_spent = 0.0
        #: id(request) -> its start (bound to it); insertion order is the FIFO
        self._waiting: OrderedDict[int, Callable[[], None]] = OrderedDict()
        self._used = 0
        self._turn: IDelayedCall | None = None

    @property
    def waiting(self) -> int:
        """How many requests wait for a later turn."""
        return len(self._waiting)

    def admit(self, request: Any, start: Callable[[], None]) -> None:
        """Run ``start`` now if this turn's budget allows and nobody waits; else queue it."""
        if self._used < self.per_turn and not self._waiting:
            self._used += 1
            self._next_turn()
            start()
            return
        self._waiting[id(request)] = start
        if self._holds is not None:
            self._holds.started()
        self._next_turn()

    def forget(self, request: Any) -> None:
        """``request``'s client hung up: drop it from the queue if it is still waiting."""
        if self._waiting.pop(id(request), None) is not None and self._holds is not None:
            self._holds.finished()

    def _next_turn(self) -> None:
        if self._turn is None:
            self._turn = self._clock.callLater(0, self._run_turn)

    def _run_turn(self) -> None:
        """A new turn: the budget is fresh; start the next ``per_turn`` waiting requests."""
        self._turn = None
        self._used = 0
        waiting = self._waiting
        if not waiting:  # the usual turn at low load: only the budget to reset, no clock read
            self._last_began = None
            return
        holds = self._holds
        now = self._now
        began = now()
        # the reactor's other work since the last turn (zero after an idle spell: a turn that
        # emptied the queue leaves no mark), which this turn's starts may match
        until = began
        if self._last_began is not None:
            until += began - self._last_began - self._last_spent
        while waiting and (self._used < self.per_turn or now() < until):
            _, start = waiting.popitem(last=False)
            self._used += 1
            try:
                start()
            except Exception:  # twisted.web answers its own failures: this is a defect
                log.failure("a queued request failed to start")
            if holds is not None:
                holds.finished()  # after start: a drain never sees zero in between
        if waiting:
            self._last_began = began
            self._last_spent = now() - began
        else:
            self._last_began = None
        self._next_turn()  # resets the budget next turn (and goes on with the queue)
