"""Column types shared by every table: UTC timestamps and JSON text.

SQLite has no time zones and PostgreSQL's ``timestamptz`` round-trips differently; storing naive
UTC and handing out aware UTC datetimes gives one behaviour on both.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import DateTime, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in code, naive UTC in the database."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


class JSONText(TypeDecorator[Any]):
    """A JSON document stored as text (portable; we never query inside it)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        if value is None or value == "":
            return None
        return orjson.loads(value)


def utcnow() -> datetime:
    """The current time as an aware UTC datetime (wall clock; tests pass times explicitly)."""
    return datetime.now(UTC)
