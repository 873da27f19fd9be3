"""The /v1 handler tasks still running, so a graceful stop can wait for their settlements.

Why not count HTTP requests: a call answers (``request.finish()``) *before* its ``finally``
queues the settlement, so "no request open" is not "nothing left to bill".  A handler task
ends only after ``GatewayCall.run`` settled (DESIGN.md: settle in ``finally``), so once
``idle()`` fires every served call's settlement is in the settler's queue, and flushing the
settler then commits all of them.

At the end of a drain's grace period ``cut_all()`` ends the calls still running: each call
ends its stream with one error event in its client's protocol and is billed for what was
delivered (operations contract §6 step 4).
"""

from __future__ import annotations

from typing import Protocol

from twisted.internet.defer import Deferred, succeed


class Cuttable(Protocol):
    """A running call that can be ended early (``GatewayCall``)."""

    def cut_for_shutdown(self) -> None: ...


class CallsInFlight:
    """Counts handler tasks and keeps the running calls; fires ``idle()`` waiters at zero."""

    def __init__(self) -> None:
        #: handler tasks not yet ended (settlement not yet queued)
        self.count = 0
        self._calls: set[Cuttable] = set()
        self._idle: list[Deferred[None]] = []

    def started(self) -> None:
        """A handler task began (``gateway.v1.call_task``): counted until ``ended()``."""
        self.count += 1

    def ended(self) -> None:
        """A handler task counted by ``started()`` ended."""
        self.count -= 1
        if self.count == 0:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                waiter.callback(None)

    def idle(self) -> Deferred[None]:
        """Fires once no handler task is running (at once when none is)."""
        if self.count == 0:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._idle.append(waiter)
        return waiter

    def opened(self, call: Cuttable) -> None:
        self._calls.add(call)

    def closed(self, call: Cuttable) -> None:
        self._calls.discard(call)

    def cut_all(self) -> int:
        """End every running call now (shutdown deadline); returns how many were cut."""
        calls = list(self._calls)
        for call in calls:
            call.cut_for_shutdown()
        return len(calls)
