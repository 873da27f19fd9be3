"""The cluster-wide lease that makes one node the studio control loop (agents contract §4.8).

Why a row and not a lock: every node runs the loop's timer, but only the holder of the
``studio_scheduler_leases`` row named ``name`` does a round.  Taking it is one conditional
write (free, expired, or already ours), so two nodes never both hold it, and a node that dies
simply stops renewing: the next node to tick after ``expires_at`` takes over within one lease.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema

TABLE = schema.studio_scheduler_leases


def acquire(conn: Connection, name: str, holder: str, now: datetime, seconds: float) -> bool:
    """Take or renew the lease ``name`` for ``holder`` until ``now + seconds``; True if held."""
    until = now + timedelta(seconds=seconds)
    taken = conn.execute(update(TABLE).where(
        TABLE.c.name == name,
        or_(TABLE.c.holder == holder, TABLE.c.expires_at.is_(None), TABLE.c.expires_at < now)
    ).values(holder=holder, expires_at=until)).rowcount
    if taken:
        return True
    if conn.execute(select(TABLE.c.name).where(TABLE.c.name == name)).first() is not None:
        return False
    try:
        with conn.begin_nested():
            conn.execute(TABLE.insert().values(name=name, holder=holder, expires_at=until))
    except IntegrityError:
        return False
    return True


def holder_of(conn: Connection, name: str) -> str:
    return str(conn.execute(select(TABLE.c.holder).where(TABLE.c.name == name)).scalar() or "")
