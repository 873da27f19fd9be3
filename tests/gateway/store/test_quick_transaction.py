"""``DBRunner.quick_transaction`` (``inline_sqlite``): on SQLite with the worker idle it runs on
the calling thread; it never runs beside a worker transaction, never waits for a lock another
process holds, never checkpoints, and leaves nothing behind when it fails -- on a real SQLite
file (and on PostgreSQL it is the worker's ``driver_transaction``)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from typing import Any

from sqlalchemy.exc import IntegrityError
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from gateway.store import inline_sqlite
from gateway.store.driver_sql import DriverSQL
from gateway.store.pool import DBRunner, make_engine
from tests.support.postgres import postgres_url


def note(sql: DriverSQL, value: str) -> int:
    """Insert ``value`` and say which thread did it."""
    sql.many("INSERT INTO notes (value) VALUES (?)", [[value]])
    return threading.get_ident()


def note_then_fail(sql: DriverSQL, value: str) -> None:
    note(sql, value)
    sql.many("INSERT INTO notes (value) VALUES (?)", [[value]])  # unique: fails


class QuickTransactionTests(TestCase):
    def setUp(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-quick-")
        self.addCleanup(shutil.rmtree, directory, True)
        self.path = os.path.join(directory, "db.sqlite3")
        engine, threads = make_engine(f"sqlite:///{self.path}")
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE notes (value TEXT PRIMARY KEY)")
        self.db = DBRunner(reactor, engine, threads)
        self.db.start()
        self.addCleanup(self.db.stop)

    def values(self) -> list[str]:
        with sqlite3.connect(self.path) as other:
            return [row[0] for row in other.execute("SELECT value FROM notes ORDER BY rowid")]

    def test_an_idle_sqlite_runner_runs_it_on_the_calling_thread(self) -> None:
        d = self.db.quick_transaction(note, "a")
        assert d.called, "no hop: the result is there when the call returns"
        assert self.successResultOf(d) == threading.get_ident()
        assert self.values() == ["a"]

    async def test_it_waits_its_turn_behind_a_worker_transaction(self) -> None:
        release = threading.Event()

        def slow(sql: DriverSQL) -> int:
            release.wait(10)
            return note(sql, "first")

        first = self.db.driver_transaction(slow)
        second = self.db.quick_transaction(note, "second")
        assert not second.called
        release.set()
        worker = await first
        assert await second == worker != threading.get_ident()
        assert self.values() == ["first", "second"]
        # the worker came back: quick again
        assert self.successResultOf(self.db.quick_transaction(note, "third")) == (
            threading.get_ident())

    async def test_a_lock_held_elsewhere_sends_it_to_the_worker_without_waiting(self) -> None:
        other = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.addCleanup(other.close)
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO notes (value) VALUES ('other process')")
        started = time.monotonic()
        d = self.db.quick_transaction(note, "mine")
        assert time.monotonic() - started < 1.0, "the calling thread must not wait for a lock"
        assert not d.called
        await deferLater(reactor, 0.2, lambda: None)
        assert not d.called  # the worker waits for the lock, as it always did
        other.execute("COMMIT")
        assert await d != threading.get_ident()
        assert self.values() == ["other process", "mine"]

    def test_a_failed_transaction_writes_nothing_and_raises_as_the_worker_would(self) -> None:
        self.successResultOf(self.db.quick_transaction(note, "a"))
        failure = self.failureResultOf(self.db.quick_transaction(note_then_fail, "b"),
                                       IntegrityError)
        assert failure.check(IntegrityError)
        assert self.values() == ["a"]
        # and the connection is usable afterwards
        self.successResultOf(self.db.quick_transaction(note, "c"))
        assert self.values() == ["a", "c"]

    async def test_checkpoints_are_left_to_the_worker(self) -> None:
        threads: list[int] = []
        for number in range(inline_sqlite.WORKER_TURN_EVERY * 2):
            threads.append(await self.db.quick_transaction(note, f"n{number}"))
        on_worker = [thread for thread in threads if thread != threading.get_ident()]
        assert len(on_worker) == 2
        # the quick connection never checkpoints (its commits leave that to the worker's)
        connection = self.db._inline._connection  # type: ignore[union-attr]
        assert connection.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
        assert connection.execute("PRAGMA busy_timeout").fetchone()[0] == 0


class PostgresQuickTransactionTests(TestCase):
    async def test_postgres_always_uses_the_worker(self) -> None:
        engine, threads = make_engine(postgres_url())
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE notes (value TEXT PRIMARY KEY)")
        db = DBRunner(reactor, engine, threads)
        db.start()
        self.addCleanup(db.stop)
        d: Deferred[Any] = db.quick_transaction(note, "pg")
        assert await d != threading.get_ident()
