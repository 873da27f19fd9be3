"""Graceful shutdown: count in-flight requests and wait (up to a deadline) for them to end."""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.web.server import Request

from tap.access_log import OFF, BufferedAccessLog
from tap.http_channel import LockgateSite


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


class CountingSite(LockgateSite):
    """A Site that tells ``InFlight`` about every request's start and end."""

    def __init__(self, resource: Any, in_flight: InFlight, *, access_log: str = OFF,
                 **kwargs: Any) -> None:
        super().__init__(resource, logPath=None if access_log == OFF else access_log, **kwargs)
        self.in_flight = in_flight
        self.access_log = access_log

    def startFactory(self) -> None:
        super().startFactory()
        if self.access_log == OFF:
            self._logFile = None  # Twisted's default would be the twistd log

    def _openLogFile(self, path: str | bytes) -> BufferedAccessLog:
        # ``path`` went through abspath(), which turns "-" into a file name: use our own value
        return BufferedAccessLog.open(self.access_log, self.reactor)

    def getResourceFor(self, request: Request) -> Any:
        self.in_flight.started()
        request.notifyFinish().addBoth(self.in_flight.finished)
        return super().getResourceFor(request)
