"""Does a settlement batch on the database thread delay a busy reactor thread, by nice value?

The reactor stand-in works like the c=1 gateway: it computes for ``--work`` ms holding the GIL
(a request's Python), then sleeps ``--wait`` ms (waiting for the upstream), and records how
late it resumes.  Meanwhile a worker thread writes real settlement batches (``write_batch``
on a SQLite file, like the settler), at nice 0 and at ``DB_THREAD_NICE`` in alternating
blocks within one process, so that the machine's drift hits both alike; a third block kind
writes nothing (the machine's own noise, ``idle``).  Run it pinned to one
core (``taskset -c 0``): that is the case the priority is for.

    taskset -c 0 .venv/bin/python bench/db_thread_priority.py [--blocks 6] [--batches 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from settlement_batch import rows_for, seed, timed_batch

from gateway.store import migrate
from gateway.store.pool import make_engine
from gateway.store.worker_priority import DB_THREAD_NICE


class Reactor(threading.Thread):
    """Compute ``work`` s, sleep ``wait`` s, again; keeps how late each wake-up was."""

    def __init__(self, work: float, wait: float) -> None:
        super().__init__(daemon=True)
        self.work, self.wait = work, wait
        self.late: list[float] = []
        self.armed = False
        self.stopped = False

    def run(self) -> None:
        while not self.stopped:
            end = time.perf_counter() + self.work
            while time.perf_counter() < end:
                pass
            before = time.perf_counter()
            time.sleep(self.wait)
            late = time.perf_counter() - before - self.wait
            if self.armed:
                self.late.append(late)


IDLE = -1


def block(engine: Any, pairs: list[tuple[int, int]], serial: list[int], reactor: Reactor,
          nice: int, batches: int, size: int) -> list[float]:
    """``batches`` batches on a fresh thread at ``nice`` (``IDLE``: the thread only sleeps
    as long); the reactor's wake-up lateness."""
    rows = [rows_for(pairs, size, serial, engine.dialect.name) for _ in range(batches)]

    def writer() -> None:
        tid = threading.get_native_id()
        if nice == IDLE:
            time.sleep(batches * 0.005)
            return
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        for batch in rows:
            timed_batch(engine, batch)
            time.sleep(0.004)  # the settler's batch interval, roughly

    reactor.late = []
    reactor.armed = True
    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    reactor.armed = False
    return reactor.late


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6, help="blocks per nice value")
    parser.add_argument("--batches", type=int, default=40, help="batches per block")
    parser.add_argument("--size", type=int, default=4, help="settlements per batch")
    parser.add_argument("--work", type=float, default=0.6, help="reactor ms per turn")
    parser.add_argument("--wait", type=float, default=0.4, help="reactor ms asleep per turn")
    args = parser.parse_args()
    engine, _ = make_engine("sqlite:///" + os.path.join(tempfile.mkdtemp(), "nice.sqlite3"))
    migrate.upgrade(engine)
    pairs = seed(engine, 50)
    serial = [0]
    for _ in range(5):
        timed_batch(engine, rows_for(pairs, args.size, serial, engine.dialect.name))
    reactor = Reactor(args.work / 1000, args.wait / 1000)
    reactor.start()
    late: dict[int, list[float]] = {0: [], DB_THREAD_NICE: [], IDLE: []}
    for index in range(args.blocks):
        kinds = (0, DB_THREAD_NICE, IDLE)
        for nice in (kinds if index % 2 == 0 else kinds[::-1]):
            got = block(engine, pairs, serial, reactor, nice, args.batches, args.size)
            late[nice].extend(got)
            label = "idle" if nice == IDLE else nice
            print(f"block {index + 1} nice {label:>4}: wake-ups {len(got)}, late p50 "
                  f"{statistics.median(got) * 1000:.3f} ms, p99 "
                  f"{sorted(got)[int(len(got) * 0.99)] * 1000:.3f} ms", flush=True)
    reactor.stopped = True
    for nice, values in late.items():
        values.sort()
        label = "idle" if nice == IDLE else nice
        print(f"nice {label:>4}: {len(values)} wake-ups; "
              f"late p50 {values[len(values) // 2] * 1000:.3f}"
              f" p90 {values[int(len(values) * 0.9)] * 1000:.3f}"
              f" p99 {values[int(len(values) * 0.99)] * 1000:.3f}"
              f" max {values[-1] * 1000:.3f} ms; share > 1 ms "
              f"{sum(v > 0.001 for v in values) / len(values) * 100:.2f} %")
    engine.dispose()


if __name__ == "__main__":
    main()
