"""Rows the assistant writes on the DB-API cursor (``driver_rows``) on real SQLite and
PostgreSQL: what Core reads back is what Core would have written, and what Core's binds refuse
(a naive time, a value JSON cannot hold, a key that is no column) is refused the same way, with
nothing written."""

from __future__ import annotations

import os
import shutil
import tempfile
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import create_engine, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import StatementError
from twisted.trial.unittest import TestCase

from gateway.store import migrate, schema
from gateway.store.assistant import runs, sessions
from gateway.store.assistant.driver_rows import DriverTable
from gateway.store.driver_sql import DriverSQL
from tests.support.postgres import postgres_url

MESSAGES = DriverTable(schema.assistant_messages)
NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def records_user(conn: Connection, name: str) -> int:
    group = conn.execute(schema.groups.insert().values(
        name="default", created_at=NOW, updated_at=NOW)).inserted_primary_key
    assert group is not None
    key = conn.execute(schema.users.insert().values(
        username=name, email=f"{name}@example.com", password_hash="x", group_id=group[0],
        referral_code=f"ref-{name}", created_at=NOW, updated_at=NOW)).inserted_primary_key
    assert key is not None
    return int(key[0])


class DriverRowsTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-driver-rows-")
        self.addCleanup(shutil.rmtree, directory, True)
        return f"sqlite:///{os.path.join(directory, 'db.sqlite3')}"

    def setUp(self) -> None:
        self.engine = create_engine(self.database_url())
        self.addCleanup(self.engine.dispose)
        migrate.upgrade(self.engine)
        self.alice = self.tx(records_user, "alice")

    def tx(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self.engine.begin() as conn:
            return fn(conn, *args, **kwargs)

    def driver(self, fn: Any) -> Any:
        with self.engine.begin() as conn:
            sql = DriverSQL(conn)
            try:
                return fn(sql)
            finally:
                sql.close()

    def session(self) -> None:
        self.tx(sessions.save_session, self.alice, "s1", {"title": "t"}, [], NOW)

    def stored_messages(self) -> list[dict[str, Any]]:
        with self.engine.begin() as conn:
            return [dict(row) for row in conn.execute(
                select(schema.assistant_messages).order_by(
                    schema.assistant_messages.c.position)).mappings()]

    def test_a_row_reads_back_as_cores_would(self) -> None:
        self.session()
        rows = sessions.message_rows("s1", [
            {"id": "m1", "role": "user", "content": "héllo", "tool_calls": [{"b": 1, "a": [2]}],
             "content_parts": [{"round": 1, "content": "x"}]},
            {"id": "m2", "role": "assistant", "content": ""}], NOW)
        self.driver(lambda sql: MESSAGES.insert(sql, rows))
        driven = self.stored_messages()
        with self.engine.begin() as conn:
            conn.execute(schema.assistant_messages.delete())
            conn.execute(schema.assistant_messages.insert(), rows)
        assert driven == self.stored_messages()
        assert driven[0]["tool_calls"] == [{"a": [2], "b": 1}]
        assert driven[1]["created_at"] == NOW

    def test_what_cores_binds_refuse_is_refused_and_nothing_is_written(self) -> None:
        self.session()
        good = sessions.message_rows("s1", [{"id": "m1", "role": "user", "content": "a"}], NOW)
        bad_rows = [
            {**good[0], "created_at": datetime(2026, 1, 1)},  # naive
            {**good[0], "content_parts": [object()]},
            {**good[0], "colour": "blue"},
        ]
        for bad in bad_rows:
            with self.assertRaises(StatementError):
                self.driver(lambda sql, bad=bad: MESSAGES.insert(sql, [good[0], bad]))
        assert self.stored_messages() == []

    def test_a_run_row_written_by_the_driver_is_the_run_core_reads(self) -> None:
        self.session()
        values = runs.run_row({"id": "acr-1", "user_id": self.alice, "session_id": "s1",
                               "assistant_message_id": "m2", "mode": "assistant",
                               "request": {"model": "m"}, "lease_expires_at": NOW}, NOW)
        self.driver(lambda sql: DriverTable(schema.assistant_runs).insert(sql, [values]))
        found = self.tx(runs.find_run, "acr-1")
        assert found is not None
        assert (found.request, found.lease_expires_at, found.tool_call_details,
                found.started_at) == ({"model": "m"}, NOW, [], None)


class PostgresDriverRowsTests(DriverRowsTests):
    def database_url(self) -> str:
        return postgres_url()
