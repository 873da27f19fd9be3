"""The database half of ``/readyz``: it answers a query and its schema is this version's.

A process on a database whose migrations are behind (or ahead, after a rollback of the code)
must not take traffic; a database that does not answer at all raises, and ``/readyz`` says 503.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

from gateway.store import migrate


def database_ready(conn: Connection) -> bool:
    """True when the database answers and its schema revision is the code's head."""
    conn.execute(text("SELECT 1"))
    return migrate.is_current(conn)
