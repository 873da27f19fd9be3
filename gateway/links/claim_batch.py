"""Claiming queued tasks for many links in shared transactions: every link that says hello
looks for tasks queued while its device was away (agents contract §2.4), so 2,000 devices
reconnecting together make 2,000 claims at once.

Why: each claim is one ``UPDATE … RETURNING`` (``connector_tasks.claim_next``), but a
transaction of its own costs a thread hop, ``BEGIN IMMEDIATE``, a commit and a wake of the
reactor.  As with hello registrations (``hello_batch``), the first claim goes at once and the
claims made while a group is in the database go together in the next one (at most
``MAX_GROUP``): a lone claim waits for nothing.  A group first reads which of its devices have
anything queued (one statement; after a restart most have nothing) and claims only for those;
each claim is still the one atomic statement it was, run in order inside the group.  A group
that fails is retried one claim per transaction, so one bad claim cannot fail the other links'
claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.store import connector_tasks as task_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.pool import DBRunner

log = Logger()

#: claims per transaction at most (a group holds SQLite's write lock while it runs)
MAX_GROUP = 256


@dataclass(frozen=True)
class Claim:
    """One link's claim of its device's oldest queued task (``claim_next``'s arguments)."""

    device_id: str
    owner_id: int | None
    link_id: str
    now: datetime
    actions: frozenset[str] | None


def claim(conn: Any, item: Claim) -> TaskRow | None:
    return task_store.claim_next(conn, item.device_id, item.owner_id, item.link_id, item.now,
                                 item.actions)


def claim_group(conn: Any, items: list[Claim]) -> list[TaskRow | None]:
    # one read finds the devices with anything queued; only theirs are claimed (in the same
    # transaction, so what the read saw is what the claims see on SQLite; on PostgreSQL a
    # task queued meanwhile wakes its link after its commit, as for any claim)
    queued = task_store.queued_among(conn, list(dict.fromkeys(item.device_id for item in items)))
    return [claim(conn, item) if item.device_id in queued else None for item in items]


class TaskClaims:
    """Group commit of task claims on one node."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._waiting: list[tuple[Claim, Deferred[TaskRow | None]]] = []
        self._writing = False

    def claim(self, item: Claim) -> Deferred[TaskRow | None]:
        """Fires with the task claimed for the link (``None``: nothing queued it may run)
        once its group committed."""
        if not self._writing:
            # a lone claim (every task's round trip) goes straight to its transaction; claims
            # arriving while it runs wait and form the next group
            self._writing = True
            lone = self.db.transaction(claim, item)
            lone.addBoth(self._lone_done)
            return lone
        done: Deferred[TaskRow | None] = Deferred()
        self._waiting.append((item, done))
        return done

    def _lone_done(self, result: object) -> object:
        self._next_group()
        return result

    def _next_group(self) -> None:
        if not self._waiting:
            self._writing = False
            return
        self._writing = True
        group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
        ensureDeferred(self._write(group)).addBoth(lambda _: self._next_group())

    async def _write(self, group: list[tuple[Claim, Deferred[TaskRow | None]]]) -> None:
        if len(group) == 1:
            await self._one_by_one(group)
            return
        try:
            tasks = await self.db.transaction(claim_group, [item for item, _ in group])
        except Exception:
            log.failure("claiming for {count} links together failed; one by one now",
                        count=len(group))
            await self._one_by_one(group)
            return
        for (_, done), task in zip(group, tasks, strict=True):
            done.callback(task)

    async def _one_by_one(self, group: list[tuple[Claim, Deferred[TaskRow | None]]]) -> None:
        for item, done in group:
            try:
                task = await self.db.transaction(claim, item)
            except Exception as exc:
                done.errback(exc)
            else:
                done.callback(task)
