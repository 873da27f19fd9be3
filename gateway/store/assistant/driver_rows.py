"""Assistant rows written with plain DB-API statements, each value bound as its column type does.

Why: every run pays for its 202 (a session, its messages, the run) and its events' group
commits before and between its rounds, on the database thread that shares the core with the
reactor; SQLAlchemy Core's Python per execution (statement building, cache keys, bind
processing) costs more there than SQLite's own work.  ``DriverSQL`` runs fixed SQL text on the
transaction's own DB-API cursor; this module converts the values exactly as the column types
would (``JSONText``: sorted-key JSON text; ``UTCDateTime``: naive UTC, refusing naive input;
``Boolean`` as the driver takes it), so a row written here reads back the same through Core.
A value a type refuses fails with ``StatementError``, as Core's bind does, and a key that is
no column of the table is refused too, as Core refuses unconsumed column names.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Table
from sqlalchemy.exc import StatementError

from gateway.store.driver_sql import DriverSQL, timestamp_param
from gateway.store.types import JSONText, UTCDateTime

_JSON, _TIME, _PLAIN = "json", "time", "plain"


def json_text(value: Any) -> str | None:
    """What ``JSONText`` stores for ``value``."""
    if value is None:
        return None
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError as exc:
        raise StatementError(f"cannot store {type(value).__name__} as JSON: {exc}", None,
                             None, exc) from exc


def time_param(value: datetime | None, dialect: str) -> Any:
    """What ``UTCDateTime`` stores for ``value``."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise StatementError("naive datetime given to a UTC column", None, None, None)
    return timestamp_param(value, dialect)


class DriverTable:
    """One table's columns and how each binds; ``INSERT`` text built once per column set."""

    def __init__(self, table: Table) -> None:
        self.name = table.name
        self.kinds = {column.name: (_JSON if isinstance(column.type, JSONText) else
                                    _TIME if isinstance(column.type, UTCDateTime) else _PLAIN)
                      for column in table.c}
        self._inserts: dict[tuple[str, ...], str] = {}

    def param(self, name: str, value: Any, dialect: str) -> Any:
        kind = self.kinds.get(name)
        if kind is None:
            raise StatementError(f"{self.name} has no column {name}", None, None, None)
        if kind == _JSON:
            return json_text(value)
        if kind == _TIME:
            return time_param(value, dialect)
        return value

    def params(self, columns: tuple[str, ...], row: dict[str, Any], dialect: str) -> list[Any]:
        return [self.param(name, row[name], dialect) for name in columns]

    def insert(self, sql: DriverSQL, rows: list[dict[str, Any]]) -> None:
        """``rows`` inserted; rows with the same keys share one ``executemany``."""
        groups: dict[tuple[str, ...], list[list[Any]]] = {}
        for row in rows:
            columns = tuple(row)
            groups.setdefault(columns, []).append(self.params(columns, row, sql.dialect))
        for columns, parameters in groups.items():
            text = self._inserts.get(columns)
            if text is None:
                text = self._inserts.setdefault(columns, (
                    f"INSERT INTO {self.name} ({', '.join(columns)}) "
                    f"VALUES ({', '.join('?' for _ in columns)})"))
            sql.many(text, parameters)
