"""Registering ``hello`` frames in groups: many links saying hello at once (a node restarting, a
network coming back) share one transaction (agents contract §2.4: a hello makes the device
online, like HTTP register).

Why: each registration is a handful of short statements, but a transaction of its own costs a
thread hop, ``BEGIN IMMEDIATE`` and a commit; with 2,000 devices reconnecting together the
commits were most of the time to welcome them all.  This is a group commit (``group_commit``): a
lone hello waits for nothing and a storm of them pays one commit per group.  A group that fails
is retried one registration per transaction, so one bad row cannot keep the other devices from
their welcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred

from gateway.links.group_commit import GroupCommit
from gateway.store import devices as device_store
from gateway.store import sandbox_hosts as host_store
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner


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


class HelloRegistrations(GroupCommit[Registration, Outcome]):
    """Group commit of hello registrations on one node."""

    def __init__(self, db: DBRunner) -> None:
        super().__init__(db, register, register_group, what="registering hellos")

    def register(self, item: Registration) -> Deferred[Outcome]:
        """Fires with the registered device (or the refusal) once its group committed."""
        return self.submit(item)
