"""Single-use sign-in challenges: passkey challenges and OIDC states (contract §2.5-§2.7, §4.11).

Every challenge is consumed by one conditional ``DELETE`` whose row count decides the winner,
so two concurrent uses of the same value cannot both succeed (contract weakness 9).  Expired
rows are purged whenever a new challenge is created.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.engine import Connection

from gateway.store import schema

#: ``user_id`` of a challenge that names an account which does not exist (matches no one)
NO_ACCOUNT = 0


def create(conn: Connection, *, key: str, purpose: str, user_id: int | None,
           data: dict[str, Any], expires_at: datetime, now: datetime) -> None:
    c = schema.auth_challenges
    conn.execute(delete(c).where(c.c.expires_at <= now))
    conn.execute(c.insert().values(key=key, purpose=purpose, user_id=user_id, data=data,
                                   expires_at=expires_at, created_at=now))


def consume(conn: Connection, key: str, purposes: tuple[str, ...], now: datetime, *,
            user_id: int | None = None) -> dict[str, Any] | None:
    """Take the unexpired challenge ``key`` of one of ``purposes`` (and bound to ``user_id``
    when given); ``None`` when there is none (unknown, expired, another purpose or user, or
    already taken by a concurrent request) -- and then nothing is taken."""
    c = schema.auth_challenges
    query = select(c).where(c.c.key == key, c.c.purpose.in_(purposes), c.c.expires_at > now)
    if user_id is not None:
        query = query.where(c.c.user_id == user_id)
    row = conn.execute(query).mappings().first()
    if row is None:
        return None
    taken = conn.execute(delete(c).where(c.c.id == row["id"]))
    if taken.rowcount != 1:
        return None
    return dict(row)


def exists(conn: Connection, key: str) -> bool:
    c = schema.auth_challenges
    return conn.execute(select(c.c.id).where(c.c.key == key)).first() is not None
