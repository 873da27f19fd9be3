"""The usage-log retention job on a real SQLite file, driven by a ``Clock``."""

from __future__ import annotations

import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from twisted.internet import reactor
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.jobs.retention import LogRetention
from gateway.settings.store import Settings
from gateway.store import schema, usage_rollups
from gateway.store.pool import DBRunner, make_engine
from tests.support.migrated_databases import migrated_sqlite_url

START = 1_800_000_000.0
NOW = datetime.fromtimestamp(START, UTC)


class RetentionTest(TestCase):
    def setUp(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-retention-")
        self.addCleanup(shutil.rmtree, directory, True)
        engine, threads = make_engine(migrated_sqlite_url(directory))
        self.db = DBRunner(reactor, engine, threads)
        self.db.start()
        self.addCleanup(self.db.stop)
        self.clock = Clock()
        self.clock.advance(START)
        self.settings = Settings()
        self.counter = 0

    async def add(self, *ages: timedelta) -> None:
        rows = []
        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        for age in ages:
            self.counter += 1
            rows.append({"request_id": f"r{self.counter}", "user_id": 1,
                         "created_at": now - age})

        def write(conn: Any) -> None:
            conn.execute(schema.usage_logs.insert(), rows)
            usage_rollups.add_logged(conn, rows)  # what settlement does with the rows it logs

        await self.db.transaction(write)

    async def ages(self) -> list[timedelta]:
        def read(conn: Any) -> list[datetime]:
            return list(conn.execute(select(schema.usage_logs.c.created_at)
                                     .order_by(schema.usage_logs.c.created_at)).scalars())

        now = datetime.fromtimestamp(self.clock.seconds(), UTC)
        return [now - created for created in await self.db.transaction(read)]

    async def test_unset_retention_deletes_nothing(self) -> None:
        await self.add(timedelta(days=400), timedelta(days=1))
        job = LogRetention(self.db, self.settings, self.clock)
        self.assertEqual(await job.run_once(), 0)
        self.assertEqual(len(await self.ages()), 2)
        self.settings.replace({"log_retention_days": "junk"})
        self.assertEqual(await job.run_once(), 0)

    async def test_deletes_rows_past_retention_in_batches(self) -> None:
        old = [timedelta(days=31, minutes=i) for i in range(10)]
        keep = [timedelta(days=29), timedelta(days=30) - timedelta(seconds=1)]
        await self.add(*old, *keep)
        self.settings.replace({"log_retention_days": "30"})
        job = LogRetention(self.db, self.settings, self.clock, batch=3)
        self.assertEqual(await job.run_once(), 10)
        self.assertEqual(sorted(await self.ages()), sorted(keep))

    async def test_runs_on_the_clock_every_interval(self) -> None:
        self.settings.replace({"log_retention_days": "1",
                               "log_retention_cleanup_interval_hours": "2"})
        job = LogRetention(self.db, self.settings, self.clock)
        job.start()
        self.addCleanup(job.stop)
        await self.add(timedelta(days=2))
        self.clock.advance(2 * 3600 - 1)
        self.assertIsNone(job._running)
        self.assertEqual(len(await self.ages()), 1)
        self.clock.advance(1)
        running = job._running
        self.assertIsNotNone(running)
        await running
        self.assertEqual(await self.ages(), [])
        # the next run comes 2 h later; the one after that uses the interval read then (5 h)
        self.settings.replace({"log_retention_days": "1",
                               "log_retention_cleanup_interval_hours": "5"})
        await self.add(timedelta(hours=23))
        self.clock.advance(2 * 3600)
        self.assertIsNotNone(job._running)
        await job._running
        self.assertEqual(await self.ages(), [])
        await self.add(timedelta(hours=23))
        self.clock.advance(2 * 3600)  # 25 h old now, but the next run is 5 h after the last
        self.assertIsNone(job._running)
        self.assertEqual(len(await self.ages()), 1)
        self.clock.advance(3 * 3600)
        self.assertIsNotNone(job._running)
        await job._running
        self.assertEqual(await self.ages(), [])

    async def test_stop_cancels_the_next_run(self) -> None:
        self.settings.replace({"log_retention_days": "1"})
        job = LogRetention(self.db, self.settings, self.clock)
        job.start()
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        job.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        await self.add(timedelta(days=5))
        self.clock.advance(48 * 3600)
        self.assertEqual(len(await self.ages()), 1)

    def test_interval_is_clamped(self) -> None:
        job = LogRetention(self.db, Settings({"log_retention_cleanup_interval_hours": "9999"}),
                           self.clock)
        self.assertEqual(job.interval_seconds(), 168 * 3600)
        job.settings.replace({})
        self.assertEqual(job.interval_seconds(), 24 * 3600)
