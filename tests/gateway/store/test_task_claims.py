"""Claims on the connector-task queue stay atomic under real concurrency (agents contract §2.3,
§2.4: a task is never handed out twice across transports).

The claim is one ``UPDATE … RETURNING`` (with ``FOR UPDATE SKIP LOCKED`` on PostgreSQL) and a
task created for a linked device may be born ``running``; these tests race several threads,
each with its own connection, over one queue on real SQLite and real PostgreSQL: a WebSocket
link's ``claim_next``, a long poll's ``claim_next`` and a by-id ``claim`` (the direct dispatch)
all going for the same tasks.  Every task must be handed out exactly once, to the claimer its
row names.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.trial.unittest import TestCase

from gateway.links import ids
from gateway.store import connector_tasks as task_store
from gateway.store import devices as device_store
from gateway.store import users as user_store
from gateway.store.pool import make_engine
from tests.support.migrated_databases import migrated_postgres_url, migrated_sqlite_url

NOW = datetime(2026, 11, 25, 20, 0, tzinfo=UTC)
TASKS = 60
CLAIMERS = ("link-a", "link-b", task_store.HTTP_CLAIM)


class TaskClaimRaceTests(TestCase):
    def database_url(self) -> str:
        directory = tempfile.mkdtemp(prefix="lockgate-claims-")
        self.addCleanup(shutil.rmtree, directory, True)
        return migrated_sqlite_url(directory)

    def setUp(self) -> None:
        self.engine = make_engine(self.database_url(), 8)[0]
        self.addCleanup(self.engine.dispose)
        with self.engine.begin() as conn:
            self.user_id = int(user_store.create_user(
                conn, username="racer", email="racer@example.com", password_hash=None,
                now=NOW))
            self.device_id = device_store.create(
                conn, device_id=ids.new_id(ids.DEVICE), user_id=self.user_id, name="box",
                remark="", mode="platform", listen_port=0, token_hash="0" * 64, hidden=False,
                now=NOW).id

    def queue(self, count: int) -> list[str]:
        with self.engine.begin() as conn:
            return [task_store.create(
                conn, task_id=ids.new_id(ids.TASK), user_id=self.user_id,
                device_id=self.device_id, action="read_file", payload={"path": str(n)},
                workspace_path="/w", status=task_store.QUEUED,
                now=NOW + timedelta(milliseconds=n)).id for n in range(count)]

    def race(self, task_ids: list[str]) -> dict[str, list[str]]:
        """Every claimer takes tasks until the queue is empty; the by-id claimer tries each
        task once, newest first (meeting the others in the middle)."""
        taken: dict[str, list[str]] = {name: [] for name in (*CLAIMERS, "by-id")}
        start = threading.Barrier(len(taken))
        errors: list[BaseException] = []

        def by_queue(name: str) -> None:
            start.wait()
            while True:
                with self.engine.begin() as conn:
                    row = task_store.claim_next(conn, self.device_id, self.user_id, name, NOW)
                if row is None:
                    return
                taken[name].append(row.id)

        def by_id() -> None:
            start.wait()
            for task_id in reversed(task_ids):
                with self.engine.begin() as conn:
                    row = task_store.claim(conn, task_id, "by-id", NOW)
                if row is not None:
                    taken["by-id"].append(row.id)

        def guarded(target: Any, *args: Any) -> None:
            try:
                target(*args)
            except BaseException as exc:  # reported below, on the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=guarded, args=(by_queue, name)) for name in CLAIMERS]
        threads.append(threading.Thread(target=guarded, args=(by_id,)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        return taken

    def check_once_each(self, task_ids: list[str], taken: dict[str, list[str]]) -> None:
        handed = [task_id for claimed in taken.values() for task_id in claimed]
        assert sorted(handed) == sorted(task_ids), "a task was handed out twice or never"
        with self.engine.begin() as conn:
            for name, claimed in taken.items():
                for task_id in claimed:
                    row = task_store.get(conn, task_id)
                    assert row is not None and row.status == task_store.RUNNING
                    assert row.claimed_by == name and row.started_at == NOW

    def test_queue_and_by_id_claimers_hand_each_task_out_once(self) -> None:
        task_ids = self.queue(TASKS)
        taken = self.race(task_ids)
        self.check_once_each(task_ids, taken)
        assert sum(1 for claimed in taken.values() if claimed) >= 2, taken

    def test_claim_next_takes_the_oldest_and_respects_owner_and_actions(self) -> None:
        task_ids = self.queue(3)
        with self.engine.begin() as conn:
            other = int(user_store.create_user(
                conn, username="other", email="other@example.com", password_hash=None,
                now=NOW))
            assert task_store.claim_next(conn, self.device_id, other, "link-a", NOW) is None
            assert task_store.claim_next(conn, self.device_id, self.user_id, "link-a", NOW,
                                         frozenset({"terminal_open"})) is None
            first = task_store.claim_next(conn, self.device_id, self.user_id, "link-a", NOW)
            second = task_store.claim_next(conn, self.device_id, None, "link-a", NOW,
                                           exclude_actions=frozenset({"run_command"}))
        assert first is not None and second is not None
        assert [first.id, second.id] == task_ids[:2]

    def test_a_task_born_running_is_never_claimed_again(self) -> None:
        with self.engine.begin() as conn:
            born = task_store.create(
                conn, task_id=ids.new_id(ids.TASK), user_id=self.user_id,
                device_id=self.device_id, action="read_file", payload={}, workspace_path="",
                status=task_store.QUEUED, now=NOW, claimed_by="link-a")
            assert born.status == task_store.RUNNING and born.claimed_by == "link-a"
            assert born.started_at == NOW
            assert task_store.claim_next(conn, self.device_id, None, "http", NOW) is None
            assert task_store.claim(conn, born.id, "http", NOW) is None
            parked = task_store.create(
                conn, task_id=ids.new_id(ids.TASK), user_id=self.user_id,
                device_id=self.device_id, action="read_file", payload={}, workspace_path="",
                status=task_store.PENDING_APPROVAL, now=NOW, claimed_by="link-a")
            assert parked.status == task_store.PENDING_APPROVAL and parked.claimed_by is None


class PostgresTaskClaimRaceTests(TaskClaimRaceTests):
    def database_url(self) -> str:
        return migrated_postgres_url()
