"""Runs blocking SQLAlchemy work in a dedicated thread pool and hands results to the reactor.

Modelled on buildbot's ``db/pool.py``: the reactor is injected, work functions receive a
``Connection`` inside a transaction, and they must return plain Python values (rows converted to
dicts/tuples) -- never live ``Result`` objects, which are not thread-safe.

SQLite gets one worker thread: SQLite serialises writers anyway, and a single thread makes every
transaction atomic with respect to the others without ``database is locked`` retries.

``driver_transaction`` is a lean path beside it for a few fixed hot statements (a connector
task's round trip): on SQLite it runs them on one DB-API connection the worker thread keeps,
with its own ``BEGIN IMMEDIATE``/``COMMIT`` -- no pool checkout, no Connection object, no
events (~0.1 ms of Python per transaction, more than SQLite needs for the statements).
SQLite's settlement batches use it too (``billing_writes.write_batch_lean``).

Pool threads run at a lower CPU priority than the reactor (``worker_priority``): on a process
confined to one core, a woken reactor preempts a transaction instead of waiting for its slice.
``quick_transaction`` runs such a transaction on the calling thread instead when the one
SQLite worker is idle (``inline_sqlite``: no thread hop, never waits for a lock).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine, create_engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from gateway.store.driver_sql import DriverSQL
from gateway.store.inline_sqlite import InlineBusy, InlineSQLite
from gateway.store.worker_priority import lower_this_thread

P = ParamSpec("P")
T = TypeVar("T")


def make_engine(url: str, threads: int | None = None) -> tuple[Engine, int]:
    """Create the engine for ``url`` and decide how many worker threads suit it."""
    if url.startswith("sqlite"):
        memory = url in ("sqlite://", "sqlite:///:memory:")
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            poolclass=StaticPool if memory else None,
        )
        _configure_sqlite(engine)
        return engine, 1
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    count = threads or 8
    engine = create_engine(url, pool_size=count, max_overflow=0, pool_pre_ping=True)
    return engine, count


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        # Take over transaction control from pysqlite so BEGIN is emitted when SQLAlchemy asks.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        # IMMEDIATE takes the write lock up front: no lock upgrades, so no deadlock between
        # processes sharing the file.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


class DBRunner:
    """A thread pool bound to one engine; ``transaction(fn, ...)`` is the only way in."""

    def __init__(self, reactor: IReactorThreads, engine: Engine, threads: int = 1) -> None:
        self.reactor = reactor
        self.engine = engine
        self.dialect = engine.dialect.name
        self._pool = ThreadPool(minthreads=1, maxthreads=threads, name="lockgate-db")
        self._running = False
        #: transactions started through ``transaction`` (a scrape-time counter)
        self.transactions = 0
        #: the DB-API connection of ``driver_transaction`` on SQLite (its one worker thread's)
        self._held: Any = None
        #: transactions committed on that connection (outside SQLAlchemy's commit events)
        self.driver_commits = 0
        #: transactions handed to the worker threads whose results have not come back yet
        self._outstanding = 0
        #: ``quick_transaction``'s connection (SQLite with one worker thread only)
        self._inline = InlineSQLite(engine) if self.dialect == "sqlite" and threads == 1 else None

    def start(self) -> None:
        if not self._running:
            self._pool.start()
            self._running = True

    def stop(self) -> None:
        if self._running:
            self._running = False
            self._pool.stop()
            if self._held is not None:
                self._held.close()
                self._held = None
            if self._inline is not None:
                self._inline.close()
            self.engine.dispose()

    def transaction(
        self, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> Deferred[T]:
        """Run ``fn(conn, *args, **kwargs)`` in one transaction on a worker thread."""
        self.transactions += 1
        return self._handed_over(deferToThreadPool(
            self.reactor, self._pool, self._on_worker, self._in_transaction, fn, args, kwargs))

    def _handed_over(self, d: Deferred[T]) -> Deferred[T]:
        self._outstanding += 1
        d.addBoth(self._came_back)
        return d

    def _came_back(self, result: T) -> T:
        self._outstanding -= 1
        return result

    def blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(conn, ...)`` in a transaction on the calling thread (start-up, scripts)."""
        return self._in_transaction(fn, args, kwargs)

    def _in_transaction(self, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    def driver_transaction(self, fn: Callable[..., T], *args: Any) -> Deferred[T]:
        """Run ``fn(sql, *args)`` in one transaction on a worker thread, ``sql`` being a
        ``DriverSQL`` (plain DB-API statements; driver errors raised as SQLAlchemy's)."""
        self.transactions += 1
        return self._handed_over(deferToThreadPool(
            self.reactor, self._pool, self._on_worker, self._in_driver_transaction, fn, args))

    def quick_transaction(self, fn: Callable[..., T], *args: Any) -> Deferred[T]:
        """``driver_transaction``, run at once on the calling (reactor) thread when that is
        safe: SQLite, its one worker thread idle (nothing queued or running: no lock held in
        this process, every earlier transaction committed) and no other process holding the
        write lock.  Otherwise, and on PostgreSQL, exactly ``driver_transaction``."""
        inline = self._inline
        if inline is not None and self._running and not self._outstanding and inline.turn():
            try:
                result = inline.run(fn, args)
            except InlineBusy:
                pass
            except BaseException:
                return fail()
            else:
                self.transactions += 1
                return succeed(result)
        return self.driver_transaction(fn, *args)

    @staticmethod
    def _on_worker(run: Callable[..., T], *args: Any) -> T:
        """On a pool thread: below the reactor's CPU priority (``worker_priority``), then
        ``run``."""
        lower_this_thread()
        return run(*args)

    def _in_driver_transaction(self, fn: Callable[..., T], args: tuple) -> T:
        if self.dialect != "sqlite" or self._pool.max > 1:
            # one held connection is only safe for a single worker thread (SQLite's)
            with self.engine.begin() as conn:
                sql = DriverSQL(conn)
                try:
                    return fn(sql, *args)
                finally:
                    sql.close()
        if self._held is None:
            # through the pool, so the connect-time pragmas apply; kept for the thread's life
            self._held = self.engine.raw_connection()
        cursor = self._held.cursor()
        sql = DriverSQL.on_cursor(cursor, "sqlite", self.engine.dialect.loaded_dbapi.Error)
        try:
            _driver(sql, "BEGIN IMMEDIATE")
            try:
                result = fn(sql, *args)
                _driver(sql, "COMMIT")
                self.driver_commits += 1
            except BaseException:
                if self._held.dbapi_connection.in_transaction:
                    cursor.execute("ROLLBACK")
                raise
            return result
        finally:
            cursor.close()


def _driver(sql: DriverSQL, statement: str) -> None:
    try:
        sql.cursor.execute(statement)
    except sql.error as exc:
        raise DBAPIError.instance(statement, None, exc, sql.error, hide_parameters=True,
                                  dialect=None) from exc
