"""The periodic job that closes top-up orders nobody paid (console contract §0, §7 weakness 21).

Why a job and not only a check at read time: an order that stays ``pending`` forever is a pay
URL that still looks valid and a row that reports stale status.  The deadline itself is stored
on each order (``expires_at`` = creation + ``payment_order_ttl_minutes``), so the job only
compares times; it is idempotent and safe to run on every node at once (conditional updates in
``gateway.store.orders``).  The clock is injected so tests drive it with ``Clock.advance``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from gateway.store import orders
from gateway.store.pool import DBRunner

log = Logger()

#: seconds between runs
DEFAULT_INTERVAL = 60.0


class OrderExpiry:
    """``start()`` runs ``run_once`` every ``interval`` seconds of ``clock``; ``stop()`` ends it."""

    def __init__(self, db: DBRunner, clock: Any, interval: float = DEFAULT_INTERVAL) -> None:
        self.db = db
        self.clock = clock
        self.interval = interval
        self._loop: LoopingCall | None = None

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.seconds(), UTC)

    async def run_once(self) -> list[str]:
        """Expire every due pending order now; returns the order numbers closed."""
        closed: list[str] = []
        while True:
            batch = await self.db.transaction(orders.expire_due, self.now())
            closed.extend(batch)
            if len(batch) < 500:
                return closed

    def _tick(self) -> Deferred[None]:
        async def tick() -> None:
            try:
                await self.run_once()
            except Exception:
                log.failure("order expiry failed")

        return ensureDeferred(tick())

    def start(self) -> None:
        if self._loop is None:
            self._loop = LoopingCall(self._tick)
            self._loop.clock = self.clock
            self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
