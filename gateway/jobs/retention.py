"""The periodic usage-log cleanup: drop rows older than ``log_retention_days`` (§5.2).

Why a job and not a query-time filter: usage logs grow by one row per call, and old rows cost
disk and slow every aggregate.  The contract's rules:

- runs every ``log_retention_cleanup_interval_hours`` (default 24, clamped 1-168), re-read
  before each run so a settings change applies from the next run on;
- ``log_retention_days`` *unset* means disabled (GET shows "30", but nothing is deleted until
  an admin actually stores a value);
- rows go in batches of ``DELETE_BATCH``, each its own short transaction, so a large backlog
  never holds a long write lock on SQLite or bloats one PostgreSQL transaction.

Everything runs on the injected clock (a ``Clock`` in tests).  A failed run is logged and the
next one is scheduled anyway.  Several nodes may run it at once: deleting old rows twice is
harmless.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.settings.store import Settings
from gateway.store.pool import DBRunner
from gateway.store.usage_queries import DELETE_BATCH, delete_usage_before

log = Logger()

MIN_INTERVAL_HOURS = 1
MAX_INTERVAL_HOURS = 168
DEFAULT_INTERVAL_HOURS = 24


class LogRetention:
    """Start with ``start()``; ``stop()`` cancels the next run."""

    def __init__(self, db: DBRunner, settings: Settings, clock: Any, *,
                 batch: int = DELETE_BATCH) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.batch = batch
        self._call: Any = None
        self._running: Deferred[int] | None = None
        self._stopped = True

    def interval_seconds(self) -> float:
        hours = self.settings.integer("log_retention_cleanup_interval_hours",
                                      DEFAULT_INTERVAL_HOURS)
        return min(max(hours, MIN_INTERVAL_HOURS), MAX_INTERVAL_HOURS) * 3600.0

    def retention_days(self) -> int | None:
        """Stored days (1-3650), or None when unset or unusable (the job is then off)."""
        raw = self.settings.raw("log_retention_days")
        if raw is None or not raw.strip():
            return None
        try:
            days = int(raw)
        except ValueError:
            return None
        return days if days >= 1 else None

    def start(self) -> None:
        self._stopped = False
        self._schedule()

    def stop(self) -> Deferred[Any] | None:
        """Cancel the next run; returns the run in progress (if any) to wait for."""
        self._stopped = True
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        return self._running

    def _schedule(self) -> None:
        if not self._stopped:
            self._call = self.clock.callLater(self.interval_seconds(), self._fire)

    def _fire(self) -> None:
        self._call = None
        running = ensureDeferred(self.run_once())
        self._running = running

        def done(result: Any) -> None:
            self._running = None
            self._schedule()

        running.addErrback(lambda f: log.warn("log retention run failed: {why}",
                                               why=f.getErrorMessage()))
        running.addBoth(done)

    async def run_once(self) -> int:
        """Delete the rows past retention now; returns how many went (0 when disabled)."""
        days = self.retention_days()
        if days is None:
            return 0
        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        cutoff = now - timedelta(days=days)
        total = 0
        while True:
            deleted = await self.db.transaction(delete_usage_before, cutoff, self.batch)
            total += deleted
            if deleted < self.batch:
                break
        if total:
            log.info("log retention removed {count} usage rows older than {cutoff}",
                     count=total, cutoff=cutoff.isoformat())
        return total
