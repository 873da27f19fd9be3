"""Looking up device tokens in groups: many links opening at once (a node restarting, a
network coming back) share one read transaction (agents contract §2.2: the WebSocket upgrade
is authenticated against the database before it happens).

Why: each lookup is one indexed ``SELECT``, but a transaction of its own costs a thread hop,
``BEGIN`` and a commit, and a wake of the reactor; with 2,000 devices reconnecting together
those were a large share of the connect.  As with hello registrations (``hello_batch``), the
first lookup goes at once and the ones that arrive while a group is in the database go together
in the next one (at most ``MAX_GROUP``): a lone upgrade waits for nothing.  Every lookup still
reads the database (no cache), so a rotated or deleted token is refused before the upgrade on
every node at once.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred

from gateway.store import devices as device_store
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner

#: lookups per transaction at most
MAX_GROUP = 256


def find_group(conn: Any, hashes: list[str]) -> list[DeviceRow | None]:
    return [device_store.find_by_token_hash(conn, token_hash) for token_hash in hashes]


class TokenLookups:
    """Group reads of device tokens on one node."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._waiting: list[tuple[str, Deferred[DeviceRow | None]]] = []
        self._reading = False

    def find(self, token_hash: str) -> Deferred[DeviceRow | None]:
        """Fires with the device holding the token (``None``: no such token) once its group
        was read; fails as the group's transaction failed."""
        done: Deferred[DeviceRow | None] = Deferred()
        self._waiting.append((token_hash, done))
        if not self._reading:
            self._next_group()
        return done

    def _next_group(self) -> None:
        if not self._waiting:
            self._reading = False
            return
        self._reading = True
        group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
        ensureDeferred(self._read(group)).addBoth(lambda _: self._next_group())

    async def _read(self, group: list[tuple[str, Deferred[DeviceRow | None]]]) -> None:
        try:
            devices = await self.db.transaction(find_group, [token for token, _ in group])
        except Exception as exc:
            for _, done in group:
                done.errback(exc)
            return
        for (_, done), device in zip(group, devices, strict=True):
            done.callback(device)
