"""Graceful shutdown: count in-flight requests and wait (up to a deadline) for them to end."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.web.server import Request, Site

from tap.http_request import LockgateRequest


class InFlight:
    def __init__(self) -> None:
        self.count = 0
        self._idle: list[Deferred[None]] = []

    def started(self) -> None:
        self.count += 1

    def finished(self, _ignored: Any = None) -> None:
        self.count -= 1
        if self.count == 0:
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                waiter.callback(None)

    def drained(self, clock: IReactorTime, deadline: float) -> Deferred[None]:
        """Fires when no request is in flight, or after ``deadline`` seconds at the latest."""
        if self.count == 0:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._idle.append(waiter)

        def give_up() -> None:
            if not waiter.called:
                waiter.callback(None)

        timer = clock.callLater(deadline, give_up)

        def stop_timer(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        waiter.addBoth(stop_timer)
        return waiter


class CountingSite(Site):
    """A Site that tells ``InFlight`` about every request's start and end."""

    def __init__(self, resource: Any, in_flight: InFlight, **kwargs: Any) -> None:
        kwargs.setdefault("requestFactory", LockgateRequest)
        super().__init__(resource, **kwargs)
        self.in_flight = in_flight

    def getResourceFor(self, request: Request) -> Any:
        self.in_flight.started()
        request.notifyFinish().addBoth(self.in_flight.finished)
        return super().getResourceFor(request)
