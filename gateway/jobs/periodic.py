"""A service that runs one "round" of background work per tick of an injected clock.

Status monitors, channel probes and scheduled price sync all need the same things: a
``LoopingCall`` on the test-drivable clock, never two rounds at once, work that ``stopService``
cancels (a cancelled round is not an error), and ``idle()`` so tests can wait for a round.
Subclasses only say what a round is (``start_round``) and ``track`` the work they spawn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

log = Logger()


class RoundService(Service, ABC):
    #: logged (with the failure) when a round fails for a reason other than cancellation
    failure_message = "background round failed"

    def __init__(self, reactor: Any, clock: Any, tick_seconds: float) -> None:
        self._reactor = reactor
        self._clock = clock
        self._tick_seconds = tick_seconds
        self._loop: LoopingCall | None = None
        self._running: Deferred[None] | None = None
        self._idle_waiters: list[Deferred[None]] = []
        self._tracked: set[Deferred[Any]] = set()

    @abstractmethod
    def start_round(self) -> Coroutine[Any, Any, None] | None:
        """The round to run now, or None when nothing is due."""

    def startService(self) -> None:
        super().startService()
        self._loop = LoopingCall(self.tick)
        self._loop.clock = self._clock
        self._loop.start(self._tick_seconds, now=False)

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        for work in list(self._tracked):
            work.cancel()
        if self._running is not None:
            self._running.cancel()
        return None

    def tick(self) -> Deferred[None] | None:
        """Start a round if one is due and none is running (also callable directly)."""
        if self._running is not None:
            return None
        coroutine = self.start_round()
        if coroutine is None:
            return None
        round_: Deferred[None] = ensureDeferred(coroutine)
        self._running = round_
        round_.addErrback(self._log_unless_cancelled)

        def done(result: Any) -> Any:
            self._running = None
            waiters, self._idle_waiters = self._idle_waiters, []
            # on the next reactor turn: after the looping call has scheduled its next tick
            for waiter in waiters:
                self._reactor.callLater(0, waiter.callback, None)
            return result

        round_.addBoth(done)
        return round_

    def idle(self) -> Deferred[None]:
        """Fires once no round is running (now, or just after the current round ends)."""
        waiter: Deferred[None] = Deferred()
        if self._running is None:
            waiter.callback(None)
        else:
            self._idle_waiters.append(waiter)
        return waiter

    def track(self, work: Deferred[Any]) -> Deferred[Any]:
        """Cancel ``work`` on stop; forget it once it ends."""
        self._tracked.add(work)

        def finished(result: Any) -> Any:
            self._tracked.discard(work)
            return result

        work.addBoth(finished)
        return work

    def _log_unless_cancelled(self, failure: Failure) -> None:
        if not failure.check(CancelledError):
            log.failure(self.failure_message, failure)
