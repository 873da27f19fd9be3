"""The round trip's lean statements (``task_round_trip`` on ``DBRunner.driver_transaction``)
write and read exactly what the Core statements do, keep their guards, and a failed lean
transaction leaves nothing behind -- on real SQLite and real PostgreSQL."""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError
from twisted.internet import reactor
from twisted.trial.unittest import TestCase

from gateway.links import ids
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store import task_round_trip
from gateway.store import users as user_store
from gateway.store.driver_sql import DriverSQL
from gateway.store.pool import DBRunner, make_engine
from tests.support.migrated_databases import migrated_postgres_url, migrated_sqlite_url

NOW = datetime(2026, 11, 26, 1, 0, 0, 123456, tzinfo=UTC)


class TaskRoundTripTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-round-trip-")
        self.addCleanup(shutil.rmtree, directory, True)
        return migrated_sqlite_url(directory)

    def setUp(self) -> None:
        engine, threads = make_engine(self.database_url())
        self.db = DBRunner(reactor, engine, threads)
        self.db.start()
        self.addCleanup(self.db.stop)
        with engine.begin() as conn:
            self.user_id = int(user_store.create_user(
                conn, username=f"u{ids.new_id('x')}", email=f"{ids.new_id('e')}@example.com",
                password_hash=None, now=NOW))
            self.device_id = self._device(conn)
            self.other_device_id = self._device(conn)

    def _device(self, conn: Any) -> str:
        return device_store.create(
            conn, device_id=ids.new_id(ids.DEVICE), user_id=self.user_id, name="box", remark="",
            mode="platform", listen_port=0, token_hash=ids.token_hash(ids.new_token()),
            hidden=False, now=NOW).id

    async def insert(self, **fields: Any) -> task_store.TaskRow:
        values: dict[str, Any] = dict(
            task_id=ids.new_id(ids.TASK), user_id=self.user_id, device_id=self.device_id,
            action="read_file", payload={"path": "a", "b": [1, {"z": None, "a": "é"}]},
            workspace_path="/w", status=task_store.QUEUED, now=NOW, run_id="acr-1",
            tool_call_id="call-1")
        values.update(fields)
        return await self.db.driver_transaction(_insert, values)

    async def stored(self, task_id: str) -> task_store.TaskRow:
        row = await self.db.transaction(task_store.get, task_id)
        assert row is not None
        return row

    async def test_a_lean_insert_reads_back_as_written(self) -> None:
        queued = await self.insert()
        assert queued.status == task_store.QUEUED and queued.claimed_by is None
        assert queued == await self.stored(queued.id)
        claimed = await self.insert(claimed_by="node/1-ab")
        assert claimed.status == task_store.RUNNING and claimed.started_at == NOW
        assert claimed == await self.stored(claimed.id)
        # a parked task is never born running
        parked = await self.insert(status=task_store.PENDING_APPROVAL, claimed_by="node/1-ab")
        assert parked.status == task_store.PENDING_APPROVAL and parked.claimed_by is None
        assert parked == await self.stored(parked.id)
        # and the queue sees the lean row like any other
        got = await self.db.transaction(task_store.claim_next, self.device_id, self.user_id,
                                        "link-a", NOW + timedelta(seconds=1))
        assert got is not None and got.id == queued.id

    async def test_finish_keeps_its_guards_and_reads_back(self) -> None:
        task = await self.insert(claimed_by="node/1-ab")
        later = NOW + timedelta(seconds=2)
        output = {"success": True, "result": "done", "exit_code": 0}
        foreign = await self.db.driver_transaction(
            _finish, task.id, self.other_device_id, output, later)
        assert foreign is None
        assert (await self.stored(task.id)).status == task_store.RUNNING
        finished = await self.db.driver_transaction(_finish, task.id, self.device_id, output,
                                                    later)
        assert finished is not None and finished.status == task_store.COMPLETED
        assert finished.output == output and finished.finished_at == later
        assert finished == await self.stored(task.id)
        retried = await self.db.driver_transaction(_finish, task.id, self.device_id, output,
                                                   later)
        assert retried is None
        queued = await self.insert()
        assert await self.db.driver_transaction(
            _finish, queued.id, self.device_id, output, later) is None

    async def test_a_failed_lean_transaction_changes_nothing(self) -> None:
        task = await self.insert()

        def insert_then_fail(sql: DriverSQL) -> None:
            task_round_trip.insert(sql, task_id="act-doomed", user_id=self.user_id,
                                   device_id=self.device_id, action="read_file", payload={},
                                   workspace_path="", status=task_store.QUEUED, now=NOW)
            raise RuntimeError("boom")

        with self.assertRaises(RuntimeError):
            await self.db.driver_transaction(insert_then_fail)
        assert await self.db.transaction(task_store.get, "act-doomed") is None
        with self.assertRaises(IntegrityError):  # the driver's error, as SQLAlchemy's
            await self.insert(task_id=task.id)
        # the connection is usable again afterwards
        again = await self.insert()
        assert again == await self.stored(again.id)


class PostgresTaskRoundTripTests(TaskRoundTripTests):
    def database_url(self) -> str:
        return migrated_postgres_url()


def _insert(sql: DriverSQL, values: dict[str, Any]) -> task_store.TaskRow:
    return task_round_trip.insert(sql, **values)


def _finish(sql: DriverSQL, task_id: str, device_id: str, output: dict[str, Any],
            now: datetime) -> task_store.TaskRow | None:
    return task_round_trip.finish(sql, task_id, device_id, success=True, result="done",
                                  error_message="", output=output, now=now)
