"""Long-lived pieces as ``MultiService`` children that stop one by one, in reverse order.

Twisted's ``MultiService.stopService`` calls every child's ``stopService`` at once and waits
for all of them; the process's stop order needs each piece stopped only after everything
built on it has finished stopping (operations contract §6: drain, handler tasks, cut, close
the listeners, flush the settler, then the wallets, the shared state and the database).
``OrderedServices`` keeps that order by itself: a piece added later depends on the pieces
added before it, so the last one added stops first, and the next waits for it.

``Piece`` turns an object with its own start/stop callables (a job with ``start``/``stop``,
a cache with ``close``) into such a child, so the composition root wires every piece the same
way instead of opening and closing each by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, ensureDeferred, maybeDeferred, succeed
from twisted.logger import Logger

log = Logger()


class OrderedServices(MultiService):
    """Children start in the order they are added (at once when added to a running one) and
    stop one at a time in reverse order; a child that fails to stop is logged, and the
    others still stop."""

    def startService(self) -> None:
        if self.running:
            return  # its pieces were started as they were built (``Lockgate.open``)
        super().startService()

    def stopService(self) -> Deferred[None]:
        if not self.running:
            return succeed(None)
        Service.stopService(self)
        return ensureDeferred(self.stop_children())

    async def stop_children(self) -> None:
        """Stop every child, the last added first, each after the previous one stopped."""
        for service in reversed(list(self)):
            try:
                await maybeDeferred(service.stopService)
            except Exception:
                log.failure("stopping {name} failed", name=service.name or repr(service))


class Piece(Service):
    """A child for an object that is not a service: ``start`` runs when the child starts,
    ``stop`` (which may return a Deferred or be a coroutine function) when it stops."""

    def __init__(self, name: str, stop: Callable[[], Any],
                 start: Callable[[], Any] | None = None) -> None:
        self.setName(name)
        self._start = start
        self._stop = stop

    def startService(self) -> None:
        super().startService()
        if self._start is not None:
            self._start()

    def stopService(self) -> Deferred[Any]:
        super().stopService()
        return maybeDeferred(self._stop)
