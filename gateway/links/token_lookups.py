"""Looking up device tokens in groups: many links opening at once (a node restarting, a
network coming back) share one read transaction (agents contract §2.2: the WebSocket upgrade
is authenticated against the database before it happens).

Why: each lookup is one indexed ``SELECT``, but a transaction of its own costs a thread hop,
``BEGIN`` and a commit, and a wake of the reactor; with 2,000 devices reconnecting together
those were a large share of the connect.  A group commit (``group_commit``), as for hello
registrations: a lone upgrade waits for nothing.  Every lookup still
reads the database (no cache), so a rotated or deleted token is refused before the upgrade on
every node at once.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred

from gateway.links.group_commit import GroupCommit
from gateway.store import devices as device_store
from gateway.store.devices import DeviceRow
from gateway.store.pool import DBRunner


def find_group(conn: Any, hashes: list[str]) -> list[DeviceRow | None]:
    return [device_store.find_by_token_hash(conn, token_hash) for token_hash in hashes]


class TokenLookups(GroupCommit[str, DeviceRow | None]):
    """Group reads of device tokens on one node; a failed read fails its whole group."""

    def __init__(self, db: DBRunner) -> None:
        super().__init__(db, device_store.find_by_token_hash, find_group, retry_alone=False,
                         what="looking up device tokens")

    def find(self, token_hash: str) -> Deferred[DeviceRow | None]:
        """Fires with the device holding the token (``None``: no such token) once its group
        was read; fails as the group's transaction failed."""
        return self.submit(token_hash)
