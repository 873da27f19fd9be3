"""Settlement throughput: how many settlements per second group commit sustains.

A script, not a test: ``python bench/settlement_bench.py [--count N] [--database URL]``.
Seeds users and API keys, then reserves and settles ``count`` requests arriving in waves
(``--per-tick`` per reactor turn, like a busy gateway) and reports settlements/s from the first
settle to the last commit, with the batch sizes the settler used.  SQLite temp file by default.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from twisted.internet import task
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementRecord, Settler
from gateway.ledger.wallet import Wallets
from gateway.store import migrate, schema
from gateway.store.pool import DBRunner, make_engine

PRICES = PriceSet(input=Decimal("1.25"), output=Decimal(10), cached_input=Decimal("0.125"))


def seed_rows(conn: Any, users: int) -> list[tuple[int, int]]:
    """``users`` users with a large balance, each with one API key: (user id, key id) pairs."""
    now = datetime.now(UTC)
    group = conn.execute(schema.groups.insert().values(
        name="bench", created_at=now, updated_at=now)).inserted_primary_key[0]
    pairs = []
    for i in range(users):
        uid = conn.execute(schema.users.insert().values(
            username=f"b{i}", email=f"b{i}@example.com", balance_nanos=10**15,
            group_id=group, referral_code=f"B{i}", created_at=now, updated_at=now)
        ).inserted_primary_key[0]
        kid = conn.execute(schema.api_keys.insert().values(
            user_id=uid, name="k", key_hash=f"{i:064d}", key_prefix="sk-",
            quota_limit_nanos=10**14, created_at=now, updated_at=now)
        ).inserted_primary_key[0]
        pairs.append((uid, kid))
    return pairs


def seed(db: DBRunner, users: int) -> list[tuple[int, int]]:
    return db.blocking(seed_rows, users)


async def run(reactor: Any, args: argparse.Namespace) -> None:
    url = args.database or "sqlite:///" + os.path.join(tempfile.mkdtemp(), "bench.sqlite3")
    engine, threads = make_engine(url)
    migrate.upgrade(engine)
    db = DBRunner(reactor, engine, threads)
    db.start()
    pairs = seed(db, args.users)
    wallets = Wallets(db)
    settler = Settler(db, reactor, wallets, batch_interval=args.interval,
                      max_batch=args.max_batch)
    usage = Usage(input=1200, cache_read=200, output=350)
    cost = compute_cost(usage, PRICES, Decimal("0.9"), Decimal(1))
    for uid, kid in pairs:  # warm the wallet cache (first use loads from the database)
        await wallets.reserve(f"warm{uid}", uid, kid, 0)
    pending = []
    started = time.perf_counter()
    for n in range(args.count):
        uid, kid = pairs[n % len(pairs)]
        reservation = await wallets.reserve(f"req-{n}", uid, kid, 10**7)
        pending.append(settler.settle(reservation, SettlementRecord(
            request_id=f"req-{n}", user_id=uid, api_key_id=kid, cost=cost, usage=usage,
            model_name="bench-model", endpoint="/v1/chat/completions", status=200)))
        if n % args.per_tick == args.per_tick - 1:
            await task.deferLater(reactor, 0, lambda: None)
    await settler.flush()
    await gatherResults(pending)
    elapsed = time.perf_counter() - started
    sizes = list(settler.batch_sizes)
    print(f"database: {db.dialect}")
    print(f"{args.count} settlements in {elapsed:.2f}s = {args.count / elapsed:,.0f}/s")
    print(f"{settler.batches_committed} transactions, mean batch "
          f"{settler.settlements_committed / max(1, settler.batches_committed):.0f}, "
          f"largest {max(sizes) if sizes else 0}")
    db.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--per-tick", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.005)
    parser.add_argument("--max-batch", type=int, default=500)
    parser.add_argument("--database", default="")
    args = parser.parse_args()
    task.react(lambda reactor: ensureDeferred(run(reactor, args)))


if __name__ == "__main__":
    main()
