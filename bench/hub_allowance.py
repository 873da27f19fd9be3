"""What the state hub costs per request, with and without allowances (``--workers``).

One process holds both ends -- a real ``HubFactory`` with its ``WalletAuthority`` on a fresh
SQLite file, listening on a Unix socket, and one worker-side ``HubState`` + ``HubWallets``
connected to it -- so its CPU time is what the supervisor and a worker together spend on the
hub per request.  Each request is what ``/v1`` asks of a ``WalletBook``: ``reserve``, then
``settling`` and ``settled`` (the batch committed what it cost), ``concurrency`` requests in
flight per wave.  Three columns alternate in one run: one process's in-memory ``Wallets`` (no
hub: the floor, what the driving coroutines themselves cost), the hub with allowances off
(every request asks it: ``BUSY_AFTER`` out of reach) and on.  The figures to quote are the
ratios above the floor; absolute microseconds move with the machine.

    .venv/bin/python bench/hub_allowance.py [--requests 20000] [--concurrency 64] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twisted.internet import defer, task

import gateway.hub.wallets as hub_wallets
from gateway.hub.client import HubState
from gateway.hub.server import HubFactory
from gateway.hub.wallets import HubWallets
from gateway.ledger.wallet import Wallets
from gateway.ledger.wallet_authority import WalletAuthority
from gateway.store import migrate, schema
from gateway.store.pool import DBRunner, make_engine

UNIT = 10**9


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def seed(db: DBRunner) -> tuple[int, int]:
    """A user with money for every request, and a key without a quota."""
    now = datetime.now(UTC)

    def insert(conn: Any) -> tuple[int, int]:
        group_id = conn.execute(schema.groups.insert().values(
            name="bench", created_at=now, updated_at=now)).inserted_primary_key[0]
        user_id = conn.execute(schema.users.insert().values(
            username="bench", email="bench@example.com", balance_nanos=10**9 * UNIT,
            group_id=group_id, referral_code="BENCH", created_at=now,
            updated_at=now)).inserted_primary_key[0]
        key_id = conn.execute(schema.api_keys.insert().values(
            user_id=user_id, name="bench", key_hash="0" * 64, key_prefix="sk-",
            quota_limit_nanos=0, created_at=now, updated_at=now)).inserted_primary_key[0]
        return int(user_id), int(key_id)

    result: tuple[int, int] = await db.transaction(insert)
    return result


async def column(reactor: Any, path: str, user: int, key: int, mode: str,
                 args: argparse.Namespace, label: str, db: DBRunner) -> float:
    """CPU microseconds per request of ``args.requests`` requests through a fresh worker
    (``mode``: "memory" -- no hub --, "hub", "allowances")."""
    hub_wallets.BUSY_AFTER = 8 if mode == "allowances" else 10**9
    state = HubState(reactor, path)
    await state.start()
    wallets: Any = Wallets(db) if mode == "memory" else HubWallets(state)
    try:
        async def one(request_id: str) -> None:
            reservation = await wallets.reserve(request_id, user, key, UNIT)
            token = wallets.settling(reservation, user, key, UNIT // 2)
            wallets.settled(token, charged_nanos=UNIT // 2)

        async def waves(count: int, prefix: str) -> None:
            for start in range(0, count, args.concurrency):
                await defer.gatherResults([
                    defer.ensureDeferred(one(f"{prefix}{i}"))
                    for i in range(start, min(count, start + args.concurrency))])

        await waves(2 * args.concurrency, f"{label}-warm-")
        await state.barrier()
        before = cpu()
        await waves(args.requests, f"{label}-")
        await state.barrier()
        return (cpu() - before) * 1e6 / args.requests
    finally:
        if mode != "memory":
            await wallets.stop()
        await state.stop()


async def run(reactor: Any, args: argparse.Namespace) -> None:
    directory = tempfile.mkdtemp(prefix="lockgate-hub-bench-")
    try:
        engine, threads = make_engine(f"sqlite:///{os.path.join(directory, 'db.sqlite3')}")
        migrate.upgrade(engine)
        db = DBRunner(reactor, engine, threads)
        db.start()
        user, key = await seed(db)
        path = os.path.join(directory, "hub.sock")
        port = reactor.listenUNIX(path, HubFactory(reactor, WalletAuthority(db)))
        spans: dict[str, list[float]] = {"hub": [], "allowances": []}
        for number in range(args.rounds):
            modes = ["memory", "hub", "allowances"]
            if number % 2:
                modes.reverse()
            figures = {}
            for mode in modes:
                figures[mode] = await column(reactor, path, user, key, mode, args,
                                             f"r{number}{mode}", db)
            floor = figures["memory"]
            for mode in spans:
                spans[mode].append(figures[mode] - floor)
            print(f"round {number + 1}: CPU us/request: one process (no hub) {floor:.1f}, "
                  f"hub {figures['hub']:.1f}, hub with allowances {figures['allowances']:.1f}; "
                  f"above one process: {spans['hub'][-1]:.1f} vs {spans['allowances'][-1]:.1f}"
                  f" (ratio {spans['allowances'][-1] / spans['hub'][-1]:.3f})", flush=True)
        ratios = [a / h for a, h in zip(spans["allowances"], spans["hub"], strict=True)]
        print(f"hub cost with / without allowances: {min(ratios):.3f} - {max(ratios):.3f}")
        await port.stopListening()
        db.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    task.react(lambda reactor: defer.ensureDeferred(run(reactor, args)))


if __name__ == "__main__":
    main()
