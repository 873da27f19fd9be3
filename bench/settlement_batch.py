"""How long one settlement batch holds the interpreter: CPU per batch of 1 / 10 / 100 records.

Why: the batch runs on the database thread, which shares the core (and the GIL) with the
reactor.  Every millisecond of Python the batch runs is a millisecond the reactor cannot serve
a request, so it shows up directly in the c=1 p99 latency (issue 22, goal 3).

A script, not a test: ``python bench/settlement_batch.py [--database URL] [--batches N]``.
For each batch size it writes ``--batches`` real batches through ``write_batch`` (the code the
settler runs) on a worker thread and reports, per batch:

- ``cpu``: the worker thread's CPU time inside the transaction (``time.thread_time``) -- an
  upper bound of the GIL hold (the database driver releases the GIL while SQLite / the network
  works, but that time is still counted here for SQLite);
- ``stall``: the worst lateness of a probe thread that wakes every 0.2 ms while the batch runs
  -- what a reactor thread on the same interpreter would have waited;
- ``wall``: the transaction's elapsed time.

Quote ratios between runs, not absolute numbers: this machine's CPU speed varies up to 2x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from settlement_bench import seed_rows
from sqlalchemy.engine import Connection

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementRecord
from gateway.store import billing_writes, migrate
from gateway.store.pool import make_engine

try:  # the settler converts rows on the reactor thread (issue 22); older code had no such step
    from gateway.store.settlement_rows import prepare
except ImportError:  # pragma: no cover - measuring the code before issue 22
    prepare = None  # type: ignore[assignment]

PRICES = PriceSet(input=Decimal("1.25"), output=Decimal(10), cached_input=Decimal("0.125"))
SIZES = (1, 10, 100)


class Probe(threading.Thread):
    """Wakes every ``period`` seconds and keeps the worst lateness seen while armed."""

    def __init__(self, period: float = 0.0002) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.worst = 0.0
        self.armed = False
        self.stopped = False

    def run(self) -> None:
        while not self.stopped:
            before = time.perf_counter()
            time.sleep(self.period)
            late = time.perf_counter() - before - self.period
            if self.armed and late > self.worst:
                self.worst = late


def seed(engine: Any, users: int) -> list[tuple[int, int]]:
    with engine.begin() as conn:
        return seed_rows(conn, users)


def rows_for(pairs: list[tuple[int, int]], size: int, serial: list[int],
             dialect: str) -> list[Any]:
    """``size`` realistic batch items, built (and converted) the way the settler does it, on
    the calling thread."""
    usage = Usage(input=1200, cache_read=200, output=350)
    cost = compute_cost(usage, PRICES, Decimal("0.9"), Decimal(1))
    rows = []
    for _ in range(size):
        n = serial[0]
        serial[0] += 1
        uid, kid = pairs[n % len(pairs)]
        rows.append(SettlementRecord(
            request_id=f"req-{n}", user_id=uid, api_key_id=kid, cost=cost, usage=usage,
            model_name="bench-model", endpoint="/v1/chat/completions", status=200,
            channel_id=1 + n % 3, user_channel_id=1, model_config_id=1,
            prices={"input_price": "1.25", "output_price": "10"},
            ip="127.0.0.1", user_agent="bench/1.0", response_time_ms=120,
            first_response_time_ms=40).row())
    return [prepare(row, dialect) for row in rows] if prepare is not None else rows


def timed_batch(engine: Any, rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(thread CPU seconds, wall seconds) of one ``write_batch`` transaction."""
    now = datetime.now(UTC)

    def work(conn: Connection) -> Any:
        return billing_writes.write_batch(conn, rows, now)

    cpu0, wall0 = time.thread_time(), time.perf_counter()
    with engine.begin() as conn:
        work(conn)
    return time.thread_time() - cpu0, time.perf_counter() - wall0


def run_into(result: list[tuple[float, float]], engine: Any, rows: list[Any],
             nice: int = 0) -> None:
    if nice:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    result.append(timed_batch(engine, rows))


def measure(engine: Any, pairs: list[tuple[int, int]], size: int, batches: int,
            serial: list[int], probe: Probe, nice: int = 0) -> dict[str, float]:
    cpus, walls, stalls = [], [], []
    for _ in range(3):  # warm caches (compiled statements, wallet rows)
        timed_batch(engine, rows_for(pairs, size, serial, engine.dialect.name))
    for _ in range(batches):
        rows = rows_for(pairs, size, serial, engine.dialect.name)
        result: list[tuple[float, float]] = []
        worker = threading.Thread(target=run_into, args=(result, engine, rows, nice))
        probe.worst = 0.0
        probe.armed = True
        worker.start()
        worker.join()
        probe.armed = False
        cpu, wall = result[0]
        cpus.append(cpu)
        walls.append(wall)
        stalls.append(probe.worst)
    return {"cpu_p50": statistics.median(cpus) * 1000,
            "cpu_p90": statistics.quantiles(cpus, n=10)[-1] * 1000,
            "stall_p50": statistics.median(stalls) * 1000,
            "stall_max": max(stalls) * 1000,
            "wall_p50": statistics.median(walls) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default="")
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--nice", type=int, default=0,
                        help="run each batch's thread at this nice value (as the settler's "
                             "database thread may be)")
    parser.add_argument("--switch-interval", type=float, default=None,
                        help="sys.setswitchinterval for the run (seconds)")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    url = args.database or "sqlite:///" + os.path.join(tempfile.mkdtemp(), "batch.sqlite3")
    engine, _ = make_engine(url)
    migrate.upgrade(engine)
    pairs = seed(engine, args.users)
    probe = Probe()
    probe.start()
    serial = [0]
    print(f"database: {engine.dialect.name}; per batch, ms (median of {args.batches})")
    print(f"{'records':>7} {'cpu p50':>8} {'cpu p90':>8} {'stall p50':>9} {'stall max':>9} "
          f"{'wall p50':>8} {'cpu/record':>10}")
    for size in SIZES:
        m = measure(engine, pairs, size, args.batches, serial, probe, args.nice)
        print(f"{size:>7} {m['cpu_p50']:8.3f} {m['cpu_p90']:8.3f} {m['stall_p50']:9.3f} "
              f"{m['stall_max']:9.3f} {m['wall_p50']:8.3f} {m['cpu_p50'] / size:10.4f}")
    probe.stopped = True
    engine.dispose()


if __name__ == "__main__":
    main()
