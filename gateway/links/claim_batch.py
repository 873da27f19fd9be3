"""Claiming queued tasks for many links in shared transactions: every link that says hello
looks for tasks queued while its device was away (agents contract §2.4), so 2,000 devices
reconnecting together make 2,000 claims at once.

Why: each claim is one ``UPDATE … RETURNING`` (``connector_tasks.claim_next``), but a
transaction of its own costs a thread hop, ``BEGIN IMMEDIATE``, a commit and a wake of the
reactor.  A group commit (``group_commit``): a lone claim (every task's round trip) waits for
nothing.  A group first reads which of its devices have
anything queued (one statement; after a restart most have nothing) and claims only for those;
each claim is still the one atomic statement it was, run in order inside the group.  A group
that fails is retried one claim per transaction, so one bad claim cannot fail the other links'
claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from twisted.internet.defer import Deferred

from gateway.links.group_commit import GroupCommit
from gateway.store import connector_tasks as task_store
from gateway.store.connector_tasks import TaskRow
from gateway.store.pool import DBRunner


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


class TaskClaims(GroupCommit[Claim, TaskRow | None]):
    """Group commit of task claims on one node."""

    def __init__(self, db: DBRunner) -> None:
        super().__init__(db, claim, claim_group, what="claiming for links")

    def claim(self, item: Claim) -> Deferred[TaskRow | None]:
        """Fires with the task claimed for the link (``None``: nothing queued it may run)
        once its transaction committed."""
        return self.submit(item)
