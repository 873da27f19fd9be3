"""Portable insert-or-update for the key/value settings table (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from gateway.store import schema


def upsert_setting(conn: Connection, key: str, value: str, now: datetime) -> None:
    table = schema.settings
    if conn.dialect.name in ("sqlite", "postgresql"):
        insert = sqlite_insert if conn.dialect.name == "sqlite" else pg_insert
        stmt = insert(table).values(key=key, value=value, created_at=now, updated_at=now)
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c.key], set_={"value": value, "updated_at": now}
        )
        conn.execute(stmt)
        return
    result = conn.execute(
        update(table).where(table.c.key == key).values(value=value, updated_at=now)
    )
    if result.rowcount == 0:
        conn.execute(table.insert().values(key=key, value=value, created_at=now, updated_at=now))
