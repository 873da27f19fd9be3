"""Whether first-run setup is done: the ``setup_completed_at`` settings row.

Exactly one administrator is ever created by first-run setup, however many requests race: the
row's primary key lets one writer win, and the losers get ``SetupAlreadyCompleted`` (raised
inside their transaction, so their user is not created either).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema

KEY = "setup_completed_at"


class SetupAlreadyCompleted(Exception):
    """Another transaction marked setup done first."""


def setup_pending(conn: Connection) -> bool:
    s = schema.settings
    return conn.execute(select(s.c.key).where(s.c.key == KEY)).first() is None


def mark_setup_completed(conn: Connection, now: datetime) -> None:
    """Insert the marker row; ``SetupAlreadyCompleted`` when it is there already."""
    try:
        conn.execute(schema.settings.insert().values(
            key=KEY, value=now.isoformat(), created_at=now, updated_at=now))
    except IntegrityError:
        raise SetupAlreadyCompleted() from None
