"""Plain DB-API statements raise what SQLAlchemy Core would, so the settler still tells a
transient failure (retry as is) from a bad record (split the batch) -- on SQLite and
PostgreSQL."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta, timezone

from sqlalchemy import Column, Integer, MetaData, Table, create_engine
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from twisted.trial.unittest import TestCase

from gateway.store.billing_writes import is_transient
from gateway.store.driver_sql import DriverSQL, timestamp_param
from gateway.store.types import UTCDateTime
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


class TimestampParamTests(TestCase):
    """``timestamp_param`` writes what SQLAlchemy's ``UTCDateTime`` writes, without Core."""

    MOMENTS = (
        datetime(2026, 11, 26, 8, 30, 0, 0, tzinfo=UTC),  # microsecond 0: still six digits
        datetime(2026, 11, 26, 8, 30, 1, 7, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC),
        datetime(2026, 11, 26, 9, 30, 0, 120, tzinfo=timezone(timedelta(hours=1))),
        datetime(2025, 12, 31, 23, 59, 59, 500_000, tzinfo=timezone(timedelta(hours=-5))),
    )

    def test_sqlite_text_is_what_sqlalchemy_stores(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-stamp-")
        self.addCleanup(shutil.rmtree, directory, True)
        engine = create_engine(f"sqlite:///{os.path.join(directory, 'db.sqlite3')}")
        self.addCleanup(engine.dispose)
        table = Table("stamps", MetaData(), Column("k", Integer, primary_key=True),
                      Column("at", UTCDateTime(), nullable=False))
        table.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"k": k, "at": m} for k, m in enumerate(self.MOMENTS)])
            stored = [row[0] for row in
                      conn.exec_driver_sql("SELECT at FROM stamps ORDER BY k").fetchall()]
        assert stored == [timestamp_param(m, "sqlite") for m in self.MOMENTS]
        assert stored[0] == "2026-11-26 08:30:00.000000"
        assert stored[3] == "2026-11-26 08:30:00.000120"

    def test_sqlite_text_is_the_strftime_form(self) -> None:
        for moment in self.MOMENTS:
            naive = moment.astimezone(UTC).replace(tzinfo=None)
            assert timestamp_param(moment, "sqlite") == naive.strftime("%Y-%m-%d %H:%M:%S.%f")

    def test_postgres_takes_the_naive_utc_datetime(self) -> None:
        for moment in self.MOMENTS:
            value = timestamp_param(moment, "postgresql")
            assert isinstance(value, datetime) and value.tzinfo is None
            assert value == moment.astimezone(UTC).replace(tzinfo=None)
