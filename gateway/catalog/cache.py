"""Holds the current ``CatalogSnapshot`` and swaps in a fresh one on every CATALOG announcement.

Loaded blocking at start (before any listener opens), then reloaded whenever an admin write on
this or another node announces ``CATALOG``.  Reloads may overlap; a generation number makes sure
an older read never replaces a newer one.
"""

from __future__ import annotations

from twisted.logger import Logger

from gateway.catalog.snapshot import CatalogSnapshot
from gateway.invalidation import CATALOG, Invalidation
from gateway.store.catalog_snapshot import load_catalog
from gateway.store.pool import DBRunner

log = Logger()


class CatalogCache:
    def __init__(self, db: DBRunner) -> None:
        self._db = db
        self._snapshot = CatalogSnapshot()
        self._started = 0
        self._installed = 0

    @property
    def snapshot(self) -> CatalogSnapshot:
        return self._snapshot

    def load_blocking(self) -> None:
        self._started += 1
        self._install(self._started, self._db.blocking(load_catalog))

    def listen(self, invalidation: Invalidation) -> None:
        invalidation.on(CATALOG, self._on_change)

    async def _on_change(self, _detail: bytes) -> None:
        await self.reload()

    async def reload(self) -> None:
        self._started += 1
        generation = self._started
        snapshot = await self._db.transaction(load_catalog)
        self._install(generation, snapshot)

    def _install(self, generation: int, snapshot: CatalogSnapshot) -> None:
        if generation > self._installed:
            self._installed = generation
            self._snapshot = snapshot
