"""Keeps a ``Settings`` snapshot current on every node: load, write-then-publish, reload.

A publish that fails (shared state away) does not fail the write, which is committed and
applied here: every node reloads when the shared state comes back, and this one publishes
again then, for nodes that never lost it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.settings.store import BUS_CHANNEL, Settings
from gateway.state.protocol import SharedState
from gateway.store.pool import DBRunner
from gateway.store.settings_rows import read_settings, write_settings

log = Logger()


class LiveSettings:
    def __init__(self, db: DBRunner, state: SharedState, settings: Settings) -> None:
        self.db = db
        self.state = state
        self.settings = settings
        self._unsubscribe: Callable[[], None] | None = None
        self._remove_recovered: Callable[[], None] | None = None
        #: a publish failed: send it again once the shared state is back
        self._unsent = False

    def load_blocking(self) -> None:
        self.settings.replace(self.db.blocking(read_settings))

    def listen(self) -> None:
        self._unsubscribe = self.state.subscribe(BUS_CHANNEL, self._changed)
        self._remove_recovered = self.state.on_recovered(self._recovered)

    def close(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()
        if self._remove_recovered:
            self._remove_recovered()

    def reload(self) -> Deferred[None]:
        return self.db.transaction(read_settings).addCallback(self.settings.replace)

    def _changed(self, _message: bytes) -> None:
        self.reload().addErrback(lambda f: log.failure("settings reload failed", f))

    def _recovered(self) -> None:
        self._changed(b"")
        if self._unsent:
            self._unsent = False
            ensureDeferred(self._publish())

    async def _publish(self) -> None:
        try:
            await self.state.publish(BUS_CHANNEL, b"changed")
        except Exception as exc:
            log.warn("could not tell the other nodes to reload settings ({error}); "
                     "they will once the shared state is back", error=exc)
            self._unsent = True

    async def announce(self) -> None:
        """Reload here and tell every other node to reload (after any settings write)."""
        await self.reload()
        await self._publish()

    async def save(self, rows: Mapping[str, str], now: datetime) -> None:
        """Write validated rows in one transaction, then make every node reload."""
        await self.db.transaction(write_settings, rows, now)
        await self.reload()
        await self._publish()
