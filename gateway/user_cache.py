"""What the gateway needs to know about a user, read from memory on the hot path.

A miss reads the user and their memberships in one transaction; the USERS invalidation channel
(announced on password change, disable, demotion, deletion, token-version bumps and group
changes, on every node through the bus) drops entries, so a revoked token or a disabled user is
refused on their next request.  A lost bus message must not keep a revoked token alive for
long, so no entry is trusted for more than ``ttl`` seconds (issue 15, finding 2).  Balances are
NOT here: the wallet owns money.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime

from gateway.invalidation import USERS, Invalidation
from gateway.store.gateway_users import GatewayUser, load_user
from gateway.store.pool import DBRunner

#: the longest an entry is trusted without a bus message (bounds a lost invalidation)
DEFAULT_TTL = 30.0


class UserCache:
    def __init__(self, db: DBRunner, invalidation: Invalidation, clock: IReactorTime,
                 max_entries: int = 100_000, ttl: float = DEFAULT_TTL) -> None:
        self._db = db
        self._clock = clock
        self._ttl = ttl
        #: user id -> (loaded at, user); a missing user is read again every time
        self._entries: OrderedDict[int, tuple[float, GatewayUser]] = OrderedDict()
        self._loading: dict[int, list[Deferred[GatewayUser | None]]] = {}
        #: bumped by every invalidation: a load that started before one is not cached
        self._generation = 0
        self._max = max_entries
        invalidation.on(USERS, self._invalidate)

    def cached(self, user_id: int) -> GatewayUser | None:
        """The remembered user while still fresh, without a Deferred (None: ask ``get``)."""
        entry = self._entries.get(user_id)
        if entry is not None and self._clock.seconds() - entry[0] < self._ttl:
            return entry[1]
        return None

    def get(self, user_id: int) -> Deferred[GatewayUser | None]:
        fresh = self.cached(user_id)
        if fresh is not None:
            return succeed(fresh)
        self._entries.pop(user_id, None)  # stale (or absent): load it again
        waiter: Deferred[GatewayUser | None] = Deferred()
        if user_id in self._loading:
            self._loading[user_id].append(waiter)
            return waiter
        waiters = self._loading[user_id] = [waiter]
        generation, started = self._generation, self._clock.seconds()

        def done() -> list[Deferred[GatewayUser | None]]:
            if self._loading.get(user_id) is waiters:
                del self._loading[user_id]
            return waiters

        def loaded(user: GatewayUser | None) -> None:
            # a missing user is not remembered: SQLite may give a deleted user's id to the
            # next account registered, and a registration announces nothing
            if user is not None and generation == self._generation:
                self._entries[user_id] = (started, user)
                if len(self._entries) > self._max:
                    self._entries.popitem(last=False)
            for each in done():
                each.callback(user)

        def failed(failure: Any) -> None:
            for each in done():
                each.errback(failure)

        self._db.transaction(load_user, user_id).addCallbacks(loaded, failed)
        return waiter

    async def _invalidate(self, detail: bytes) -> None:
        # a load already under way may have read the old row: callers from now on wait for a
        # fresh one (those already waiting asked before the change)
        self._generation += 1
        if detail.isdigit():
            self._entries.pop(int(detail), None)
            self._loading.pop(int(detail), None)
        else:
            self._entries.clear()
            self._loading.clear()
