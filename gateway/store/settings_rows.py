"""The settings table as a whole: every stored text by key, and writing a set of them.

``gateway.settings`` keeps the parsed snapshot in memory and decides what may be written; this
module is only the table.  Writes upsert each key inside the caller's transaction, so a
validated change of several keys lands together or not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.upsert import upsert_setting


def read_settings(conn: Connection) -> dict[str, str]:
    """Every stored setting: key to its text."""
    rows = conn.execute(select(schema.settings.c.key, schema.settings.c.value)).all()
    return {key: value for key, value in rows}


def write_settings(conn: Connection, rows: Mapping[str, str], now: datetime) -> None:
    """Insert or replace each key's text."""
    for key, value in rows.items():
        upsert_setting(conn, key, value, now)
