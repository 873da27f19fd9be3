"""Writes channel health to the database behind the hot path, coalesced per channel.

``gateway.health`` decides on this node's memory (cooldowns must be instant); the operator and
the other processes see the persisted counts (``GET /api/channels``: ``consecutive_failures``,
``last_failure_at``, ``last_failure_reason``).  Changes are queued without waiting; one write
is in flight at a time and everything queued meanwhile goes into the next one, so an upstream
outage answering thousands of requests costs a handful of small transactions, not one each.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.logger import Logger

from gateway.store.channel_health import HealthChange, write_health
from gateway.store.pool import DBRunner

log = Logger()


class HealthJournal:
    def __init__(self, db: DBRunner, now: Callable[[], datetime]) -> None:
        self._db = db
        self._now = now
        self._queued: dict[int, HealthChange] = {}
        self._writing: Deferred[None] | None = None
        self._idle: list[Deferred[None]] = []

    def failed(self, channel_id: int, reason: str) -> None:
        change = self._queued.get(channel_id, HealthChange())
        self._queued[channel_id] = change.then_failed(reason, self._now())
        self._kick()

    def recovered(self, channel_id: int) -> None:
        self._queued[channel_id] = HealthChange().then_recovered()
        self._kick()

    def flush(self) -> Deferred[None]:
        """Fires once everything queued so far is written (or its write failed and was logged)."""
        if self._writing is None and not self._queued:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        self._idle.append(waiter)
        return waiter

    def _kick(self) -> None:
        if self._writing is None:
            self._writing = ensureDeferred(self._drain())

    async def _drain(self) -> None:
        try:
            while self._queued:
                changes, self._queued = self._queued, {}
                try:
                    await self._db.transaction(write_health, changes)
                except Exception:
                    log.failure("could not persist channel health of channels {ids}",
                                ids=sorted(changes))
        finally:
            self._writing = None
            waiters, self._idle = self._idle, []
            for waiter in waiters:
                waiter.callback(None)
