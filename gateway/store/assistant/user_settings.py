"""Per-user assistant settings (agents contract §1.2) and the user's custom MCP servers (§1.3).

The row is created lazily, the first time anything reads it, with an insert that ignores a
concurrent twin (two first requests at once both end with the same single row).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.rows import UserSettingsRow, row_of

TABLE = schema.assistant_user_settings


def _create_missing(conn: Connection, user_id: int, now: datetime) -> None:
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    conn.execute(insert(TABLE).values(user_id=user_id, custom_mcp_servers=[], created_at=now,
                                      updated_at=now).on_conflict_do_nothing())


def user_settings(conn: Connection, user_id: int, now: datetime) -> UserSettingsRow:
    """The user's row, created with defaults when missing."""
    found = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id)).mappings().first()
    if found is None:
        _create_missing(conn, user_id, now)
        found = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id)).mappings().one()
    return row_of(UserSettingsRow, found)


def save_user_settings(conn: Connection, user_id: int, values: dict[str, Any],
                       now: datetime) -> UserSettingsRow:
    """Overwrite the given columns (the row is created first if needed)."""
    user_settings(conn, user_id, now)
    conn.execute(update(TABLE).where(TABLE.c.user_id == user_id).values(**values,
                                                                        updated_at=now))
    return user_settings(conn, user_id, now)


def custom_servers(conn: Connection, user_id: int) -> list[dict[str, Any]]:
    """The user's custom MCP servers (``[]`` without a row; reads never create one)."""
    stored = conn.execute(select(TABLE.c.custom_mcp_servers).where(
        TABLE.c.user_id == user_id)).scalar()
    return list(stored or [])
