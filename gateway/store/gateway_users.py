"""What the gateway reads about a user: a frozen ``GatewayUser``, from one row and its memberships.

The /v1 path authorises from this record only (enabled, admin, token version, groups); balances
are not in it, the wallet owns money.  ``gateway.user_cache`` keeps these in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema


@dataclass(frozen=True)
class GatewayUser:
    id: int
    enabled: bool
    is_admin: bool
    token_version: int
    primary_group_id: int
    #: (group id, expires_at or None) of every membership row
    memberships: tuple[tuple[int, datetime | None], ...]

    def active_group_ids(self, now: datetime) -> list[int]:
        """Groups whose membership has not expired; the primary group when there are none."""
        active = [gid for gid, expires in self.memberships if expires is None or expires > now]
        return active or [self.primary_group_id]


def load_user(conn: Connection, user_id: int) -> GatewayUser | None:
    u, m = schema.users, schema.group_memberships
    row = conn.execute(
        select(u.c.id, u.c.enabled, u.c.is_admin, u.c.token_version, u.c.group_id)
        .where(u.c.id == user_id)
    ).first()
    if row is None:
        return None
    memberships = conn.execute(
        select(m.c.group_id, m.c.expires_at).where(m.c.user_id == user_id).order_by(m.c.id)
    ).all()
    return GatewayUser(
        id=row.id, enabled=bool(row.enabled), is_admin=bool(row.is_admin),
        token_version=row.token_version, primary_group_id=row.group_id,
        memberships=tuple((gid, expires) for gid, expires in memberships),
    )
