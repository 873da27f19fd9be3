"""Notices a hung Redis: one that keeps its sockets open but answers nothing.

A stopped or restarted Redis closes its connections, which the connection pool sees at once; a
hung one (paused, swapping, a network path that silently drops) does not.  So a PING goes out
every ``interval`` seconds, and one unanswered after ``timeout`` seconds makes Redis count as
hung until a later PING is answered.  The verdict waits one more reactor turn after the timer:
a process that was too busy to read for a while then reads a PONG that had already arrived,
rather than calling a healthy Redis hung.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall

#: seconds between PINGs, and how long one may go unanswered: a hung Redis is noticed in 2 s
INTERVAL = 0.5
TIMEOUT = 1.5


class Heartbeat:
    """PINGs through ``ping()`` while ``connected()``; calls ``changed()`` whenever ``hung``
    flips, and ``hang_up()`` on each unanswered PING (to drop the connections it waits on)."""

    def __init__(self, reactor: Any, ping: Callable[[], Deferred[Any]],
                 connected: Callable[[], bool], changed: Callable[[], None],
                 hang_up: Callable[[], None], *, interval: float = INTERVAL,
                 timeout: float = TIMEOUT) -> None:
        self._reactor = reactor
        self._ping = ping
        self._connected = connected
        self._changed = changed
        self._hang_up = hang_up
        self._interval = interval
        self._timeout = timeout
        self._loop = LoopingCall(self._beat)
        self._loop.clock = reactor
        self._waiting = False
        self._pings = 0
        self._verdict: Any = None
        self.hung = False

    def start(self) -> None:
        if not self._loop.running:
            self._loop.start(self._interval, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()
        self._cancel_verdict()

    def _beat(self) -> None:
        if self._waiting or not self._connected():
            return
        self._waiting = True
        self._pings += 1
        this = self._pings
        self._verdict = self._reactor.callLater(self._timeout, self._verdict_due)

        def finished() -> None:
            if this == self._pings:  # a late answer to an older PING leaves this one alone
                self._waiting = False
                self._cancel_verdict()

        def answered(_: Any) -> None:
            finished()
            if self.hung:
                self.hung = False
                self._changed()

        def lost(_: Any) -> None:
            # the connection went: the pool tells that, and the next beat asks again
            finished()

        self._ping().addCallbacks(answered, lost)

    def _cancel_verdict(self) -> None:
        if self._verdict is not None and self._verdict.active():
            self._verdict.cancel()
        self._verdict = None

    def _verdict_due(self) -> None:
        self._verdict = self._reactor.callLater(0, self._judge)

    def _judge(self) -> None:
        self._verdict = None
        if not self._waiting or not self._loop.running:
            return  # answered (or lost) meanwhile, or stopped
        self._waiting = False
        if not self.hung:
            self.hung = True
            self._changed()
        self._hang_up()
