"""Plain DB-API statements raise what SQLAlchemy Core would, so the settler still tells a
transient failure (retry as is) from a bad record (split the batch) -- on SQLite and
PostgreSQL."""

from __future__ import annotations

import os
import shutil
import tempfile

from sqlalchemy import create_engine
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from twisted.trial.unittest import TestCase

from gateway.store.billing_writes import is_transient
from gateway.store.driver_sql import DriverSQL
from tests.support.postgres import postgres_url


class DriverSQLTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-driver-")
        self.addCleanup(shutil.rmtree, directory, True)
        return f"sqlite:///{os.path.join(directory, 'db.sqlite3')}"

    def setUp(self) -> None:
        self.engine = create_engine(self.database_url())
        self.addCleanup(self.engine.dispose)
        with self.engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")

    def test_rows_written_and_read_with_the_dialects_placeholders(self) -> None:
        with self.engine.begin() as conn:
            sql = DriverSQL(conn)
            sql.many("INSERT INTO t (k, v) VALUES (?, ?)", [(1, 10), (2, 20), (3, 30)])
            rows = sql.all(f"SELECT k, v FROM t WHERE k IN ({sql.marks(2)}) ORDER BY k", [1, 3])
            sql.close()
        assert rows == [(1, 10), (3, 30)]

    def test_a_duplicate_key_is_an_integrity_error_not_transient(self) -> None:
        with self.assertRaises(IntegrityError) as caught, self.engine.begin() as conn:
            sql = DriverSQL(conn)
            sql.many("INSERT INTO t (k, v) VALUES (?, ?)", [(1, 10), (1, 11)])
        assert not is_transient(caught.exception)
        with self.engine.connect() as conn:  # the transaction rolled back as a whole
            assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 0

    def test_a_failing_statement_keeps_the_drivers_classification(self) -> None:
        with self.assertRaises((OperationalError, ProgrammingError)) as caught, \
                self.engine.begin() as conn:
            DriverSQL(conn).all("SELECT missing FROM t")
        assert caught.exception.orig is not None


class PostgresDriverSQLTests(DriverSQLTests):
    def database_url(self) -> str:
        return postgres_url()
