"""The supervisor's state hub over a real Unix socket, with two worker-side clients.

Each client is what one ``--workers`` process holds (``HubState`` + ``HubWallets``, and its own
``Settler`` on the shared SQLite file); the hub is the supervisor's ``HubFactory`` with a
``WalletAuthority`` on the same database.  Everything runs on the real reactor.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.task import deferLater

from gateway.billing.cost import compute_cost
from gateway.billing.usage import Usage
from gateway.hub.client import HubState
from gateway.hub.server import HubFactory
from gateway.hub.wallets import HubWallets
from gateway.ledger.settlement import SettlementRecord, Settler
from gateway.ledger.wallet import InsufficientBalance, KeyQuotaExceeded, WalletUnavailable
from gateway.ledger.wallet_authority import Owner, WalletAuthority
from gateway.store.pool import DBRunner, make_engine
from tests.gateway.billing.ledger_case import UNIT, LedgerCase
from tests.gateway.billing.test_wallet import ONE_UNIT


def one_unit() -> Any:
    return compute_cost(Usage(input=1), ONE_UNIT)


class HubCase(LedgerCase):
    def setUp(self) -> None:
        super().setUp()
        directory = tempfile.mkdtemp(prefix="lockgate-hub-test-")
        self.path = os.path.join(directory, "hub.sock")
        self.authority = WalletAuthority(self.db)
        self.hub = HubFactory(reactor, self.authority)
        self.port = reactor.listenUNIX(self.path, self.hub)
        self.addCleanup(self.port.stopListening)

    async def worker(self) -> tuple[HubState, HubWallets, Settler]:
        state = HubState(reactor, self.path)
        await state.start()
        self.addCleanup(state.stop)
        wallets = HubWallets(state)
        return state, wallets, Settler(self.db, self.clock, wallets)

    async def reserve_many(self, wallets: HubWallets, n: int, user: int, key: int | None,
                           amount: int, prefix: str) -> tuple[list[Any], list[Any]]:
        results = await DeferredList(
            [wallets.reserve(f"{prefix}{i}", user, key, amount) for i in range(n)],
            consumeErrors=True)
        return ([value for ok, value in results if ok],
                [value for ok, value in results if not ok])


class HubWalletTests(HubCase):
    async def test_two_workers_200_concurrent_reservations_against_a_quota_for_10(self) -> None:
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        (_, a, settle_a), (_, b, settle_b) = await self.worker(), await self.worker()
        both = await DeferredList([
            Deferred.fromCoroutine(self.reserve_many(a, 100, user, key, UNIT, "a")),
            Deferred.fromCoroutine(self.reserve_many(b, 100, user, key, UNIT, "b"))])
        (_, (admitted_a, refused_a)), (_, (admitted_b, refused_b)) = both
        assert len(admitted_a) + len(admitted_b) == 10
        assert all(f.check(KeyQuotaExceeded) for f in refused_a + refused_b)
        # each worker settles its own calls, in its own transactions, on the shared file
        for settler, admitted in ((settle_a, admitted_a), (settle_b, admitted_b)):
            for reservation in admitted:
                settler.settle(reservation, SettlementRecord(
                    request_id=reservation.request_id, user_id=user, api_key_id=key,
                    cost=one_unit()))
        await DeferredList([settle_a.flush(), settle_b.flush()])
        row = await self.key_row(key)
        assert row["spent_nanos"] == 10 * UNIT and row["request_count"] == 10
        assert await self.balance(user) == 990 * UNIT
        await a.hub.barrier()
        await b.hub.barrier()
        for wallets in (a, b):
            with self.assertRaises(KeyQuotaExceeded):
                await wallets.reserve("late", user, key, 1)
        await self.verify_ledger()

    async def test_two_writers_on_one_sqlite_file_settle_every_call_exactly_once(self) -> None:
        """Each worker commits through its own engine (its own connection and lock on the
        file, as separate processes do): no batch lost, none written twice."""
        engine, threads = make_engine(str(self.db.engine.url))
        other_db = DBRunner(reactor, engine, threads)
        other_db.start()
        self.addCleanup(other_db.stop)
        user = await self.add_user(60 * UNIT)
        key = await self.add_key(user)
        (_, a, settle_a), (state_b, b, _) = await self.worker(), await self.worker()
        settle_b = Settler(other_db, self.clock, b)
        both = await DeferredList([
            Deferred.fromCoroutine(self.reserve_many(a, 50, user, key, UNIT, "a")),
            Deferred.fromCoroutine(self.reserve_many(b, 50, user, key, UNIT, "b"))])
        admitted = [r for _, (ok, _) in both for r in ok]
        assert len(admitted) == 60
        settled = []
        for reservation in admitted:
            settler = settle_a if reservation.request_id.startswith("a") else settle_b
            settled.append(settler.settle(reservation, SettlementRecord(
                request_id=reservation.request_id, user_id=user, api_key_id=key,
                cost=one_unit())))
            if len(settled) % 7 == 0:  # batches of both writers interleave on the file
                settle_a.flush()
                settle_b.flush()
        await DeferredList([settle_a.flush(), settle_b.flush()])
        await DeferredList(settled)
        logs = await self.logs()
        assert sorted(row["request_id"] for row in logs) == sorted(
            r.request_id for r in admitted)
        assert sum(row["cost_nanos"] for row in logs) == 60 * UNIT
        assert await self.balance(user) == 0
        assert (await self.key_row(key))["spent_nanos"] == 60 * UNIT
        await self.verify_ledger()
        await state_b.barrier()
        with self.assertRaises(InsufficientBalance):
            await a.reserve("late", user, key, 1)

    async def test_a_balance_is_admitted_once_across_workers_and_spendable_after_commit(
            self) -> None:
        user = await self.add_user(5 * UNIT)
        (_, a, settle_a), (_, b, _) = await self.worker(), await self.worker()
        first = await a.reserve("a1", user, None, 3 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await b.reserve("b1", user, None, 3 * UNIT)
        # settled for less than reserved: the rest is spendable on the other worker
        settle_a.settle(first, SettlementRecord(request_id="a1", user_id=user,
                                                api_key_id=None, cost=one_unit()))
        await settle_a.flush()
        await a.hub.barrier()
        assert self.authority.available_nanos(user) == 4 * UNIT
        await b.reserve("b2", user, None, 4 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await a.reserve("a2", user, None, 1)
        assert await self.balance(user) == 4 * UNIT

    async def test_a_worker_that_disconnects_gives_its_holds_back(self) -> None:
        user = await self.add_user(5 * UNIT)
        (state_a, a, _), (_, b, _) = await self.worker(), await self.worker()
        await a.reserve("a1", user, None, 5 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await b.reserve("b1", user, None, 1)
        await until(lambda: len(self.hub.connections) == 2)
        state_a._protocol.transport.abortConnection()  # a killed worker: no goodbye
        await until(lambda: len(self.hub.connections) == 1)
        reservation = await b.reserve("b2", user, None, 5 * UNIT)
        assert reservation.amount_nanos == 5 * UNIT

    async def test_without_the_hub_admission_fails_closed(self) -> None:
        user = await self.add_user(5 * UNIT)
        state, a, _ = await self.worker()
        lost: list[bool] = []
        state.lost.addCallback(lambda _: lost.append(True))
        await until(lambda: len(self.hub.connections) == 1)
        for connection in list(self.hub.connections):
            connection.transport.loseConnection()
        await until(lambda: bool(lost))
        assert not state.available
        with self.assertRaises(WalletUnavailable):
            await a.reserve("a1", user, None, UNIT)


class WalletAuthorityTests(HubCase):
    async def test_commits_reported_in_any_order_move_the_balance_by_what_they_charged(
            self) -> None:
        user = await self.add_user(10 * UNIT)
        a, b = Owner("a"), Owner("b")
        assert await self.authority.reserve(a, "a1", user, None, 4 * UNIT) == "ok"
        assert await self.authority.reserve(b, "b1", user, None, 4 * UNIT) == "ok"
        self.authority.settling(a, "a1", "a1", user, None, 4 * UNIT)
        self.authority.settling(b, "b1", "b1", user, None, 4 * UNIT)
        # b's batch committed second (balance 2) but its report comes first
        self.authority.settled(b, "b1", 4 * UNIT)
        self.authority.settled(a, "a1", 4 * UNIT)
        assert self.authority.available_nanos(user) == 2 * UNIT
        assert await self.authority.reserve(a, "a2", user, None, 2 * UNIT) == "ok"
        assert await self.authority.reserve(b, "b2", user, None, 1) == "balance"

    async def test_a_lost_owner_reloads_the_accounts_of_its_queued_debits(self) -> None:
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=6 * UNIT)
        a = Owner("a")
        assert await self.authority.reserve(a, "a1", user, key, 4 * UNIT) == "ok"
        self.authority.settling(a, "a1", "a1", user, key, 4 * UNIT)
        # the worker committed (the database says so) and died before it reported it
        await self.set_balance(user, 6 * UNIT)
        await self.db.transaction(lambda conn: conn.exec_driver_sql(
            f"UPDATE api_keys SET spent_nanos = {4 * UNIT} WHERE id = {key}"))
        assert self.authority.owner_lost(a) == 1
        b = Owner("b")
        assert await self.authority.reserve(b, "b1", user, key, 3 * UNIT) == "quota"
        assert await self.authority.reserve(b, "b2", user, key, 2 * UNIT) == "ok"
        assert self.authority.available_nanos(user) == 4 * UNIT


class HubStateTests(HubCase):
    async def test_rate_limit_windows_counters_and_claims_are_shared(self) -> None:
        (a, _, _), (b, _, _) = await self.worker(), await self.worker()
        verdicts = await DeferredList(
            [(a if i % 2 else b).take_all([("rpm:1", 3)], 60) for i in range(10)])
        assert sum(verdict.allowed for _, verdict in verdicts) == 3
        assert [await a.incr("rr"), await b.incr("rr"), await a.incr("rr", 5)] == [1, 2, 7]
        assert [await a.claim("task:1", 30), await b.claim("task:1", 30)] == [True, False]
        await a.release("task:1")
        assert await b.claim("task:1", 30)
        hits = [await s.hit("login", 2, 60) for s in (a, b, a)]
        assert [h.allowed for h in hits] == [True, True, False]

    async def test_a_publish_reaches_every_worker_the_sender_too(self) -> None:
        (a, _, _), (b, _, _) = await self.worker(), await self.worker()
        got: list[tuple[str, bytes]] = []
        a.subscribe("lockgate:keys", lambda m: got.append(("a", m)))
        unsubscribe = b.subscribe("lockgate:keys", lambda m: got.append(("b", m)))
        await b.publish("lockgate:keys", b"n1|*")
        await a.barrier()
        await b.barrier()
        assert sorted(got) == [("a", b"n1|*"), ("b", b"n1|*")]
        unsubscribe()
        await a.publish("lockgate:keys", b"n2|*")
        await a.barrier()
        await b.barrier()
        assert sorted(got) == [("a", b"n1|*"), ("a", b"n2|*"), ("b", b"n1|*")]
        # a message longer than one AMP value (64 KiB) arrives whole; an empty one too
        big = bytes(range(256)) * 1000
        for message in (big, b""):
            await a.publish("lockgate:keys", message)
            await a.barrier()
            assert got[-1] == ("a", message)


async def until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Wait (on the real reactor) until ``condition()`` holds."""
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError("condition not met in time")
