"""Graceful drain: count in-flight requests, and refuse new ones while the process stops.

Operations contract §6: from SIGTERM on the listeners stay open so a load balancer can see the
drain -- ``/readyz`` answers 503 ``{"status":"draining"}``, ``/healthz`` 200, and every other
new request 503 with ``Connection: close`` and ``Retry-After: 1`` (gateway routes in their
family's native error shape) without reaching any upstream -- while the requests already in
flight run to their end or to the grace deadline.  ``InFlight.draining`` is that state (the
``lockgate_draining`` metric reads it).
"""

from __future__ import annotations

from typing import Any

import orjson
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.web.resource import Resource
from twisted.web.server import Request

from gateway import errors
from tap.access_log import OFF, BufferedAccessLog
from tap.dispatch_budget import DispatchBudget
from tap.health import DrainingReadyz
from tap.http_channel import LockgateSite

#: paths a draining process still serves normally (``/readyz`` answers "draining")
_STILL_SERVED = (b"/healthz", b"/metrics")
_GATEWAY_PREFIXES = (b"/v1/", b"/v1beta/")
_PROBES = (b"/healthz", b"/readyz")


class InFlight:
    """The HTTP requests open now, and whether the process is draining."""

    def __init__(self) -> None:
        self.count = 0
        #: True from the stop signal on (read by the probes, the site and the metrics)
        self.draining = False
        self._idle: list[Deferred[None]] = []
        #: True from SIGTERM on (the ``lockgate_draining`` gauge reads it)
        self.draining = False

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
        return within(waiter, clock, deadline)


def within(waiting: Deferred[Any], clock: IReactorTime, seconds: float) -> Deferred[None]:
    """Fires with None when ``waiting`` fires or ``seconds`` have passed, whichever is first
    (``waiting`` itself is left alone: it may still fire later)."""
    out: Deferred[None] = Deferred()

    def fire(_: Any = None) -> Any:
        if timer.active():
            timer.cancel()
        if not out.called:
            out.callback(None)
        return _

    timer = clock.callLater(max(seconds, 0.0), fire)
    waiting.addBoth(fire)
    return out


class DrainingRefusal(Resource):
    """503 for a request that arrived while draining; the connection closes after it."""

    isLeaf = True

    def render(self, request: Any) -> bytes:
        channel = getattr(request, "channel", None)
        if channel is not None and hasattr(channel, "persistent"):
            channel.persistent = False  # twisted.web closes the connection after this answer
        path: bytes = request.path
        if path.startswith(_GATEWAY_PREFIXES):
            family = errors.family_for_path(path.decode("utf-8", "replace"))
            status, headers, body = errors.render(family, errors.shutting_down())
            request.setResponseCode(status)
            for name, value in headers.items():
                request.setHeader(name.encode(), value.encode())
            return body
        request.setResponseCode(503)
        request.setHeader(b"content-type", b"application/json")
        request.setHeader(b"retry-after", b"1")
        request.setHeader(b"connection", b"close")
        return orjson.dumps({"error": "The server is shutting down; retry the request",
                             "type": "service_unavailable"})


class CountingSite(LockgateSite):
    """A Site that tells ``InFlight`` about every request's start and end, and turns new
    requests away while draining."""

    def __init__(self, resource: Any, in_flight: InFlight, *, access_log: str = OFF,
                 **kwargs: Any) -> None:
        super().__init__(resource, logPath=None if access_log == OFF else access_log, **kwargs)
        self.in_flight = in_flight
        self.access_log = access_log
        #: ``--workers``: which worker this is, told on the probes (``Lockgate-Worker``)
        self.worker_label: bytes | None = None
        #: starts a burst of /v1 requests a few per reactor turn (``tap.dispatch_budget``)
        self.dispatch_budget: DispatchBudget | None = None

    def startFactory(self) -> None:
        super().startFactory()
        if self.access_log == OFF:
            self._logFile = None  # Twisted's default would be the twistd log

    def _openLogFile(self, path: str | bytes) -> BufferedAccessLog:
        # ``path`` went through abspath(), which turns "-" into a file name: use our own value
        return BufferedAccessLog.open(self.access_log, self.reactor)

    def getResourceFor(self, request: Request) -> Any:
        if self.worker_label is not None and request.path in _PROBES:
            request.setHeader(b"lockgate-worker", self.worker_label)
        if self.in_flight.draining:
            path = (request.path or b"/").rstrip(b"/")
            if path == b"/readyz":
                return DrainingReadyz()
            if path not in _STILL_SERVED:
                return DrainingRefusal()
        self.in_flight.started()
        when_done = getattr(request, "when_done", None)
        if when_done is not None:  # LockgateRequest: no Deferred per request
            when_done(self.in_flight.finished)
        else:
            request.notifyFinish().addBoth(self.in_flight.finished)
        return super().getResourceFor(request)
