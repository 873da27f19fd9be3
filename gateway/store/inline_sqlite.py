"""A short SQLite transaction run on the caller's (the reactor's) thread, for the two writes of
a connector task's round trip (``DBRunner.quick_transaction``).

Why: each hop to the database thread and back costs two context switches and a wake-up of the
reactor (~0.4 ms of a trip's ~2 ms on this machine), far more than SQLite needs for one insert
or one guarded update.  It is safe only when nothing else can be writing, so the runner uses it
only while its one worker thread has no transaction queued or running (then this process holds
no SQLite lock and every earlier transaction has committed: order is kept), and this module
never waits for a lock:

- the connection's ``busy_timeout`` is 0: when another process holds the write lock the
  transaction gives up at once (``InlineBusy``, nothing written) and the caller hands it to the
  worker thread, which waits as it always did;
- it never checkpoints (``wal_autocheckpoint`` 0 on this connection only): a checkpoint syncs
  files to disk, which must not stall the reactor.  Every ``WORKER_TURN_EVERY``-th quick
  transaction goes to the worker instead, whose commit checkpoints as usual, so the WAL stays
  bounded whatever else the node does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from gateway.store.driver_sql import DriverSQL

T = TypeVar("T")

#: one quick transaction in this many runs on the worker thread (its commit checkpoints)
WORKER_TURN_EVERY = 200
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class InlineBusy(Exception):
    """Another connection holds the lock: nothing was written; run it on the worker."""


class InlineSQLite:
    """One DB-API connection of ``engine`` for transactions on the calling thread."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._proxy: Any = None
        self._connection: Any = None
        self._calls = 0

    def turn(self) -> bool:
        """Whether this quick transaction may run here (``False``: the worker's turn)."""
        self._calls += 1
        return self._calls % WORKER_TURN_EVERY != 0

    def run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """``fn(sql, *args)`` in one ``BEGIN IMMEDIATE`` transaction, here and now; raises
        ``InlineBusy`` (after rolling back) when the database is locked elsewhere."""
        connection = self._connection or self._open()
        cursor = connection.cursor()
        sql = DriverSQL.on_cursor(cursor, "sqlite", sqlite3.Error)
        try:
            _statement(cursor, "BEGIN IMMEDIATE")
            try:
                result = fn(sql, *args)
                _statement(cursor, "COMMIT")
            except BaseException:
                if connection.in_transaction:
                    cursor.execute("ROLLBACK")
                raise
            return result
        except DBAPIError as exc:
            if _busy(exc.orig):
                raise InlineBusy() from exc
            raise
        finally:
            cursor.close()

    def close(self) -> None:
        if self._proxy is not None:
            self._proxy.close()
            self._proxy = self._connection = None

    def _open(self) -> Any:
        # through the pool, so the connect-time pragmas (WAL, foreign keys) apply; then this
        # connection's own: never wait for a lock, never checkpoint
        self._proxy = self._engine.raw_connection()
        self._connection = self._proxy.dbapi_connection
        cursor = self._connection.cursor()
        try:
            cursor.execute("PRAGMA busy_timeout = 0")
            cursor.execute("PRAGMA wal_autocheckpoint = 0")
        finally:
            cursor.close()
        return self._connection


def _statement(cursor: Any, statement: str) -> None:
    try:
        cursor.execute(statement)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(statement, None, exc, sqlite3.Error, hide_parameters=True,
                                  dialect=None) from exc


def _busy(error: BaseException | None) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and (code & 0xFF) in _BUSY_CODES
