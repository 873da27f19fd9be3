"""Group commit for the link layer's short transactions: token lookups on upgrade, hello
registrations, task claims.

Why: each of these is one or a few short statements, but a transaction of its own costs a
thread hop, ``BEGIN``/``COMMIT`` and a wake of the reactor; with 2,000 devices reconnecting
together (a node restarting, a network coming back) those costs were most of the time to
welcome them all.  The first item goes at once in its own transaction (a lone hello, the claim
of every task's round trip, waits for nothing); the items submitted while a transaction is in
the database go together in the next one (at most ``max_group``).  A group that fails is either
retried one item per transaction, so one bad row cannot fail the others (writes), or failed as a
whole (reads, where retrying would only read again what just failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.store.pool import DBRunner

log = Logger()

I = TypeVar("I")  # noqa: E741  (the item)
R = TypeVar("R")

#: items per transaction at most (a writing group holds SQLite's write lock while it runs)
MAX_GROUP = 256


class GroupCommit(Generic[I, R]):
    """Runs ``one(conn, item)`` alone when nothing is in flight, else queues the item for the
    next ``group(conn, items)`` (one answer per item, in order, in one transaction)."""

    def __init__(self, db: DBRunner, one: Callable[[Any, I], R],
                 group: Callable[[Any, list[I]], list[R]], *, retry_alone: bool = True,
                 what: str = "items", max_group: int = MAX_GROUP) -> None:
        self.db = db
        self._one = one
        self._group = group
        self._retry_alone = retry_alone
        self._what = what
        self._max_group = max_group
        self._waiting: list[tuple[I, Deferred[R]]] = []
        self._busy = False

    def submit(self, item: I) -> Deferred[R]:
        """Fires with ``one``'s answer for ``item`` once its transaction committed."""
        if not self._busy:
            self._busy = True
            lone = self.db.transaction(self._one, item)
            lone.addBoth(self._after_lone)
            return lone
        done: Deferred[R] = Deferred()
        self._waiting.append((item, done))
        return done

    def _after_lone(self, result: object) -> object:
        self._next_group()
        return result

    def _next_group(self) -> None:
        if not self._waiting:
            self._busy = False
            return
        group = self._waiting[:self._max_group]
        self._waiting = self._waiting[self._max_group:]
        ensureDeferred(self._run(group)).addBoth(lambda _: self._next_group())

    async def _run(self, group: list[tuple[I, Deferred[R]]]) -> None:
        try:
            answers = await self.db.transaction(self._group, [item for item, _ in group])
        except Exception as exc:
            if not self._retry_alone:
                for _, done in group:
                    done.errback(exc)
                return
            log.failure("{what}: {count} together failed; one by one now",
                        what=self._what, count=len(group))
            await self._one_by_one(group)
            return
        for (_, done), answer in zip(group, answers, strict=True):
            done.callback(answer)

    async def _one_by_one(self, group: list[tuple[I, Deferred[R]]]) -> None:
        for item, done in group:
            try:
                answer = await self.db.transaction(self._one, item)
            except Exception as exc:
                done.errback(exc)
            else:
                done.callback(answer)
