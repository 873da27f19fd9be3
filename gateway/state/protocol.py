"""Shared state between Lockgate processes: rate-limit windows, counters, claims and a bus.

Two implementations satisfy this protocol: ``MemoryState`` (one process, no Redis) and
``RedisState``.  Everything returns Deferreds so callers do not care which one they hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from twisted.internet.defer import Deferred

from gateway.frozen_init import direct_init


class SharedStateUnavailable(ConnectionError):
    """The shared state is known to be unreachable, so the command was not even tried."""


@direct_init  # two per /v1 request (the global and the user-channel limit)
@dataclass(frozen=True)
class WindowVerdict:
    """Outcome of a fixed-window rate-limit check."""

    allowed: bool
    #: requests left in the window after this one (0 when refused)
    remaining: int
    #: whole seconds until the window that refused resets (>= 1 when refused, else 0)
    retry_after: int


class SharedState(Protocol):
    #: True when other processes see the same state (Redis): money holds must then be
    #: shared too, and reachability is worth reporting
    shared_across_processes: bool

    @property
    def available(self) -> bool:
        """Whether the state answers now (always True in memory); admission and ``/readyz``
        fail closed while it is False."""

    def on_recovered(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` whenever the state is reachable again after being lost (bus
        messages sent meanwhile are gone: reload what is cached); returns a remover."""

    def take_all(
        self, limits: Sequence[tuple[str, int]], window_seconds: int
    ) -> Deferred[WindowVerdict]:
        """Admit only if every ``(key, limit)`` is under its limit; count only admitted calls."""

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        """Count this call (admitted or not) and admit while the count is within ``limit``."""

    def incr(self, key: str, amount: int = 1) -> Deferred[int]:
        """Add to a counter (created at 0) and return the new value."""

    def claim(self, key: str, ttl_seconds: int) -> Deferred[bool]:
        """Set ``key`` if absent (with a TTL); True for exactly one caller."""

    def release(self, key: str) -> Deferred[None]:
        """Drop a claim."""

    def publish(self, channel: str, message: bytes) -> Deferred[None]:
        """Deliver ``message`` to every subscriber of ``channel`` on every node (this one too)."""

    def subscribe(self, channel: str, callback: Callable[[bytes], None]) -> Callable[[], None]:
        """Call ``callback(message)`` for each message on ``channel``; returns an unsubscribe."""

    def start(self) -> Deferred[None]: ...

    def stop(self) -> Deferred[None]: ...
