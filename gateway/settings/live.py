"""Keeps a ``Settings`` snapshot current on every node: load, write-then-publish, reload."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from gateway.settings.store import BUS_CHANNEL, Settings, read_all, write_rows
from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner

log = Logger()


class LiveSettings:
    def __init__(self, db: DBRunner, state: SharedState, settings: Settings) -> None:
        self.db = db
        self.state = state
        self.settings = settings
        self._unsubscribe: Callable[[], None] | None = None

    def load_blocking(self) -> None:
        self.settings.replace(self.db.blocking(read_all))

    def listen(self) -> None:
        self._unsubscribe = self.state.subscribe(BUS_CHANNEL, self._changed)

    def close(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()

    def reload(self) -> Deferred[None]:
        return self.db.transaction(read_all).addCallback(self.settings.replace)

    def _changed(self, _message: bytes) -> None:
        self.reload().addErrback(lambda f: log.failure("settings reload failed", f))

    async def announce(self) -> None:
        """Reload here and tell every other node to reload (after any settings write)."""
        await self.reload()
        await self.state.publish(BUS_CHANNEL, b"changed")

    async def save(self, rows: Mapping[str, str], now: datetime) -> None:
        """Write validated rows in one transaction, then make every node reload."""
        await self.db.transaction(write_rows, rows, now)
        await self.reload()
        await self.state.publish(BUS_CHANNEL, b"changed")
