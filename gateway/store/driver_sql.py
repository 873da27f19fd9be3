"""Plain DB-API statements inside a SQLAlchemy transaction, for the hottest writes.

Why: the settlement batch runs on the database thread, which shares the core and the GIL with
the reactor.  A SQLAlchemy Core execution costs ~0.1-0.3 ms of Python (context, compiled-cache
lookup, bind and result processing) even when the statement is cached; a batch of a dozen
statements held the GIL for milliseconds.  Statements here are fixed SQL text (built once per
dialect and cached) run on the transaction's own DB-API cursor, with parameters the caller
already converted to what the driver takes -- no per-row Python beyond the driver's own.

Only the two dialects Lockgate runs on: SQLite (``?``) and PostgreSQL via psycopg (``%s``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError


class DriverSQL:
    """The transaction's DB-API cursor plus the dialect's spelling of placeholders."""

    __slots__ = ("cursor", "dialect", "error", "mark", "postgres")

    def __init__(self, conn: Connection) -> None:
        self.dialect = conn.dialect.name
        self.postgres = self.dialect == "postgresql"
        self.mark = "%s" if self.postgres else "?"
        self.error = conn.dialect.loaded_dbapi.Error
        dbapi = conn.connection.dbapi_connection
        assert dbapi is not None
        self.cursor = dbapi.cursor()

    @classmethod
    def on_cursor(cls, cursor: Any, dialect: str, error: Any) -> DriverSQL:
        """Statements on a DB-API ``cursor`` of a connection outside SQLAlchemy (the lean
        transactions of ``DBRunner.driver_transaction``)."""
        sql = cls.__new__(cls)
        sql.dialect = dialect
        sql.postgres = dialect == "postgresql"
        sql.mark = "%s" if sql.postgres else "?"
        sql.error = error
        sql.cursor = cursor
        return sql

    def marks(self, count: int) -> str:
        """``?, ?, ?`` (or ``%s, ...``) for an IN list or a VALUES row of ``count`` items."""
        return ", ".join([self.mark] * count)

    def sql(self, text: str) -> str:
        """``text`` written with ``?`` placeholders, in this dialect's placeholder."""
        return text.replace("?", "%s") if self.postgres else text

    def for_update(self) -> str:
        """The row-lock suffix (SQLite's ``BEGIN IMMEDIATE`` already serialises writers)."""
        return " FOR UPDATE" if self.postgres else ""

    def all(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        statement = self.sql(text)
        try:
            self.cursor.execute(statement, tuple(params))
            return list(self.cursor.fetchall())
        except self.error as exc:
            raise self._wrapped(statement, exc) from exc

    def many(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        statement = self.sql(text)
        try:
            self.cursor.executemany(statement, rows)
        except self.error as exc:
            raise self._wrapped(statement, exc) from exc

    def _wrapped(self, statement: str, exc: Exception) -> BaseException:
        """The driver's error as SQLAlchemy raises it (``OperationalError``,
        ``IntegrityError``, ...), so callers classify it the same way as Core's."""
        return DBAPIError.instance(statement, None, exc, self.error, hide_parameters=True,
                                   dialect=None)

    def close(self) -> None:
        self.cursor.close()


def timestamp_param(moment: datetime, dialect: str) -> Any:
    """A UTC datetime as ``UTCDateTime`` stores it: naive UTC; SQLite's text form with
    microseconds always present (what SQLAlchemy writes, so text ordering stays right).

    ``isoformat`` writes the same text as ``strftime("%Y-%m-%d %H:%M:%S.%f")`` (zero-padded
    year as SQLAlchemy's own format) at half the cost; it runs once per settled request."""
    naive = (moment.replace(tzinfo=None) if moment.tzinfo is UTC
             else moment.astimezone(UTC).replace(tzinfo=None))
    if dialect == "sqlite":
        return naive.isoformat(" ", "microseconds")
    return naive
