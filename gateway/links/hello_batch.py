"""Registering ``hello`` frames in groups: many links saying hello at once (a node restarting, a
network coming back) share one transaction (agents contract §2.4: a hello makes the device
online, like HTTP register).

Why: each registration is a handful of short statements, but a transaction of its own costs a
thread hop, ``BEGIN IMMEDIATE`` and a commit; with 2,000 devices reconnecting together the
commits were most of the time to welcome them all.  This is a group commit: the first hello goes
at once, and the hellos that arrive while a group is in the database go together in the next one
(at most ``MAX_GROUP``), so a lone hello waits for nothing and a storm of them pays one commit
per group.  A group that fails is retried one registration per transaction, so one bad row
cannot keep the other devices from their welcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from gateway.store import devices as device_store
from gateway.store import sandbox_hosts as host_store
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner

log = Logger()

#: registrations per transaction at most (a group holds SQLite's write lock while it runs)
MAX_GROUP = 256


@dataclass(frozen=True)
class Registration:
    """One hello, already validated: what it reports and the link that said it."""

    device_id: str
    #: the token hash the link authenticated with (a token rotated since refuses the hello)
    token_hash: str
    fields: dict[str, Any]
    capacity: dict[str, Any] | None
    max_parallel: int
    link_id: str
    now: datetime


#: the device as registered, or why the hello is refused ("token revoked", "host disabled")
Outcome = DeviceRow | str


def register(conn: Any, item: Registration) -> Outcome:
    device = device_store.get(conn, item.device_id)
    if device is None or device.token_hash != item.token_hash:
        return "token revoked"
    host = host_store.get_by_device(conn, device.id)
    if host is not None and not host.enabled:
        return "host disabled"
    if host is not None and item.capacity is not None:
        host_store.record_capacity(conn, device.id, item.capacity, item.now)
    return device_store.report(conn, device, item.fields, item.now, link_id=item.link_id,
                               max_parallel=item.max_parallel)


def register_group(conn: Any, items: list[Registration]) -> list[Outcome]:
    return [register(conn, item) for item in items]


class HelloRegistrations:
    """Group commit of hello registrations on one node."""

    def __init__(self, db: DBRunner) -> None:
        self.db = db
        self._waiting: list[tuple[Registration, Deferred[Outcome]]] = []
        self._writing = False

    def register(self, item: Registration) -> Deferred[Outcome]:
        """Fires with the registered device (or the refusal) once its group committed."""
        done: Deferred[Outcome] = Deferred()
        self._waiting.append((item, done))
        if not self._writing:
            self._next_group()
        return done

    def _next_group(self) -> None:
        if not self._waiting:
            self._writing = False
            return
        self._writing = True
        group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
        ensureDeferred(self._write(group)).addBoth(lambda _: self._next_group())

    async def _write(self, group: list[tuple[Registration, Deferred[Outcome]]]) -> None:
        try:
            outcomes = await self.db.transaction(register_group, [item for item, _ in group])
        except Exception:
            log.failure("registering {count} hellos together failed; one by one now",
                        count=len(group))
            await self._one_by_one(group)
            return
        for (_, done), outcome in zip(group, outcomes, strict=True):
            done.callback(outcome)

    async def _one_by_one(self, group: list[tuple[Registration, Deferred[Outcome]]]) -> None:
        for item, done in group:
            try:
                outcome = await self.db.transaction(register, item)
            except Exception as exc:
                done.errback(exc)
            else:
                done.callback(outcome)
