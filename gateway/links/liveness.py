"""Native pings only to links that went quiet, from one sweep for the whole node (agents
contract §2.4: native ping/pong for liveness, every 20 s).

Why not autobahn's auto-ping: it pings every link every interval whatever it sent, and keeps
two timers per link that every pong re-arms.  At 2,000 idle links that was half of the node's
idle frames (a ping and a pong per link every 20 s on top of the heartbeat and its ack) and a
steady churn of timers.  Any frame a device sends proves it alive, so a link that heartbeats is
(practically) never pinged; one that has been silent for the contract's 20 s gets one native
ping within a sweep (so a silent peer is still pinged every 20-22 s, as §2.4 says), and one
that stays silent for ``PONG_TIMEOUT_SECONDS`` after it is dropped -- which closes it like any
other close (offline at once, its running tasks failed).  A dead peer is thus found within
``PING_AFTER_SECONDS + PONG_TIMEOUT_SECONDS`` plus one sweep (42 s), inside the 60 s online
window of §2.5.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()

#: how often the node looks at its links (one timer for all of them)
SWEEP_SECONDS = 2.0
#: silence after which a link is pinged: §2.4's 20 s.  A device heartbeating every 20 s is
#: heard again before a sweep finds it silent that long (but for its timer's jitter)
PING_AFTER_SECONDS = 20.0
#: silence after the ping after which the peer is taken for dead
PONG_TIMEOUT_SECONDS = 20.0


class Watched(Protocol):
    """What the sweep needs of a link: when it last heard from the peer, when it pinged."""

    #: clock time of the last bytes received from the peer
    heard_at: float
    #: clock time of the native ping sent while the peer is silent, ``None`` when none is
    #: outstanding (the link clears it on every receipt)
    pinged_at: float | None

    def ping(self) -> None:
        """Send one native ping."""

    def drop(self) -> None:
        """Drop the connection of a peer that stopped answering."""


class LivenessSweep:
    """Every ``SWEEP_SECONDS``: ping the links silent for ``PING_AFTER_SECONDS``, drop those
    still silent ``PONG_TIMEOUT_SECONDS`` after their ping."""

    def __init__(self, clock: Any, links: Callable[[], Iterable[Watched]]) -> None:
        self.clock = clock
        self._links = links
        self._loop = LoopingCall(self.sweep)
        self._loop.clock = clock

    def start(self) -> None:
        if not self._loop.running:
            self._loop.start(SWEEP_SECONDS, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def sweep(self) -> None:
        now = self.clock.seconds()
        for link in list(self._links()):
            try:
                self._check(link, now)
            except Exception:
                log.failure("liveness check of a link failed")

    @staticmethod
    def _check(link: Watched, now: float) -> None:
        pinged_at = link.pinged_at
        if pinged_at is not None:
            if now - pinged_at >= PONG_TIMEOUT_SECONDS:
                link.drop()
            return
        if now - link.heard_at >= PING_AFTER_SECONDS:
            link.pinged_at = now
            link.ping()
