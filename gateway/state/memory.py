"""In-process ``SharedState`` for single-process deployments and tests (clock injected)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from gateway.state.protocol import WindowVerdict

log = Logger()


class MemoryState:
    """Fixed windows open at the first call and expire ``window_seconds`` later."""

    shared_across_processes = False

    def __init__(self, clock: IReactorTime) -> None:
        self._clock = clock
        # key -> (count, window end)
        self._windows: dict[str, tuple[int, float]] = {}
        self._counters: dict[str, int] = defaultdict(int)
        self._claims: dict[str, float] = {}
        self._subscribers: dict[str, list[Callable[[bytes], None]]] = defaultdict(list)
        self._calls = 0

    @property
    def available(self) -> bool:
        """Memory is never out of reach."""
        return True

    def on_recovered(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Memory is never lost, so ``callback`` is never called."""
        return lambda: None

    def _window(self, key: str, window_seconds: int) -> tuple[int, float]:
        now = self._clock.seconds()
        count, ends = self._windows.get(key, (0, 0.0))
        if ends <= now:
            count, ends = 0, now + window_seconds
        self._calls += 1
        if self._calls % 4096 == 0:
            self._windows = {k: v for k, v in self._windows.items() if v[1] > now}
        return count, ends

    def _retry_after(self, ends: float) -> int:
        return max(1, math.ceil(ends - self._clock.seconds()))

    def take_now(self, key: str, limit: int, window_seconds: int) -> WindowVerdict:
        """``take_all([(key, limit)], window_seconds)``'s verdict, answered at once: the rate
        limiter of a process without Redis asks on every request, without a Deferred."""
        count, ends = self._window(key, window_seconds)
        if count >= limit:
            return WindowVerdict(False, 0, self._retry_after(ends))
        self._windows[key] = (count + 1, ends)
        return WindowVerdict(True, limit - count - 1, 0)

    def hit_now(self, key: str, limit: int, window_seconds: int) -> WindowVerdict:
        """``hit``'s verdict, answered at once (see ``take_now``)."""
        count, ends = self._window(key, window_seconds)
        count += 1
        self._windows[key] = (count, ends)
        if count > limit:
            return WindowVerdict(False, 0, self._retry_after(ends))
        return WindowVerdict(True, limit - count, 0)

    def take_all(
        self, limits: Sequence[tuple[str, int]], window_seconds: int
    ) -> Deferred[WindowVerdict]:
        states = [(key, limit, *self._window(key, window_seconds)) for key, limit in limits]
        for _key, limit, count, ends in states:
            if count >= limit:
                return succeed(WindowVerdict(False, 0, self._retry_after(ends)))
        remaining = None
        for key, limit, count, ends in states:
            self._windows[key] = (count + 1, ends)
            left = limit - count - 1
            remaining = left if remaining is None else min(remaining, left)
        return succeed(WindowVerdict(True, remaining or 0, 0))

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        return succeed(self.hit_now(key, limit, window_seconds))

    def incr(self, key: str, amount: int = 1) -> Deferred[int]:
        self._counters[key] += amount
        return succeed(self._counters[key])

    def claim(self, key: str, ttl_seconds: int) -> Deferred[bool]:
        now = self._clock.seconds()
        if self._claims.get(key, 0.0) > now:
            return succeed(False)
        self._claims[key] = now + ttl_seconds
        return succeed(True)

    def release(self, key: str) -> Deferred[None]:
        self._claims.pop(key, None)
        return succeed(None)

    def publish(self, channel: str, message: bytes) -> Deferred[None]:
        for callback in list(self._subscribers.get(channel, ())):
            try:
                callback(message)
            except Exception:
                # one failing subscriber must not stop the others, nor fail the publisher
                log.failure("subscriber of {channel} failed", channel=channel)
        return succeed(None)

    def subscribe(self, channel: str, callback: Callable[[bytes], None]) -> Callable[[], None]:
        self._subscribers[channel].append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers[channel]:
                self._subscribers[channel].remove(callback)

        return unsubscribe

    def start(self) -> Deferred[None]:
        return succeed(None)

    def stop(self) -> Deferred[None]:
        return succeed(None)
