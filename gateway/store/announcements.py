"""Announcement rows: what operators tell users on the home page (console contract §5.13).

Ordered ``sort_order ASC, created_at DESC`` (then id DESC so equal times stay stable).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema

table = schema.announcements
ORDER = (table.c.sort_order.asc(), table.c.created_at.desc(), table.c.id.desc())


def list_announcements(conn: Connection, *, enabled_only: bool = False) -> list[dict[str, Any]]:
    query = select(table).order_by(*ORDER)
    if enabled_only:
        query = query.where(table.c.enabled.is_(True))
    return [dict(row) for row in conn.execute(query).mappings()]


def get_announcement(conn: Connection, item_id: int) -> dict[str, Any] | None:
    row = conn.execute(select(table).where(table.c.id == item_id)).mappings().first()
    return dict(row) if row else None


def create_announcement(conn: Connection, values: dict[str, Any],
                        now: datetime) -> dict[str, Any]:
    key = conn.execute(
        table.insert().values(**values, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert key is not None
    item_id = int(key[0])
    return get_announcement(conn, item_id) or {}


def update_announcement(conn: Connection, item_id: int, values: dict[str, Any],
                        now: datetime) -> dict[str, Any] | None:
    result = conn.execute(
        update(table).where(table.c.id == item_id).values(**values, updated_at=now))
    if result.rowcount == 0:
        return None
    return get_announcement(conn, item_id)


def delete_announcement(conn: Connection, item_id: int) -> bool:
    return bool(conn.execute(delete(table).where(table.c.id == item_id)).rowcount)
