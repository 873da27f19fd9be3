"""The database threads yield the core to the reactor: they run at a higher nice value.

Why it matters (issue 22, goal 3): a settlement batch's SQLite and WAL work runs with the GIL
released, so on a process confined to one core only the kernel's scheduler decides whether a
woken reactor waits for it.  These tests run real transactions on a real SQLite file through
``DBRunner`` and ask the kernel for the running thread's nice value.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from typing import Any

from twisted.internet import reactor
from twisted.trial.unittest import SkipTest, TestCase

from gateway.store.pool import DBRunner, make_engine
from gateway.store.worker_priority import DB_THREAD_NICE
from tests.support.migrated_databases import migrated_sqlite_url


def nice_here(_: Any = None) -> tuple[int, int]:
    """(thread id, nice value) of the calling thread."""
    tid = threading.get_native_id()
    return tid, os.getpriority(os.PRIO_PROCESS, tid)


class WorkerPriorityTests(TestCase):
    def setUp(self) -> None:
        if not hasattr(os, "setpriority"):
            raise SkipTest("no per-thread nice value here")
        directory = tempfile.mkdtemp(prefix="lockgate-nice-")
        self.addCleanup(shutil.rmtree, directory, True)
        engine, threads = make_engine(migrated_sqlite_url(directory, "db"))
        self.db = DBRunner(reactor, engine, threads)
        self.db.start()
        self.addCleanup(self.db.stop)
        self.base = os.getpriority(os.PRIO_PROCESS, 0)

    async def test_a_transaction_runs_below_the_reactors_priority(self) -> None:
        tid, nice = await self.db.transaction(nice_here)
        self.assertNotEqual(tid, threading.get_native_id())
        self.assertEqual(nice, min(19, self.base + DB_THREAD_NICE))

    async def test_the_lean_driver_path_too_and_only_once_per_thread(self) -> None:
        first = await self.db.driver_transaction(nice_here)
        second = await self.db.driver_transaction(nice_here)
        again = await self.db.transaction(nice_here)
        self.assertEqual(first[0], second[0])  # SQLite: one worker thread
        expected = min(19, self.base + DB_THREAD_NICE)
        self.assertEqual([first[1], second[1], again[1]], [expected] * 3)

    def test_blocking_work_on_the_calling_thread_keeps_its_priority(self) -> None:
        before = nice_here()
        during = self.db.blocking(nice_here)
        self.assertEqual(during, before)
        self.assertEqual(nice_here()[1], self.base)
