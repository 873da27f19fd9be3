"""Allowances: a busy worker admits and settles an account's requests without asking the hub.

Two worker-side clients on the real Unix socket of a real ``HubFactory`` (``HubCase``), one
SQLite file, each worker settling through its own ``Settler``.  What must hold: the hub's
arithmetic never lets the workers together hold more than a balance or a quota (an allowance
is a hold), an idle allowance never refuses a request the balance covers (it is recalled), a
drained or killed worker's allowance comes back, and every call is settled exactly once.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, DeferredList

from gateway.hub.wallets import BUSY_AFTER, TARGET_REQUESTS, HubWallets
from gateway.ledger.settlement import SettlementRecord, Settler
from gateway.ledger.wallet import InsufficientBalance, KeyQuotaExceeded, Reservation
from gateway.ledger.wallet_authority import GRANT_SHARE
from tests.gateway.billing.ledger_case import UNIT
from tests.gateway.billing.test_wallet import one_unit_cost
from tests.gateway.hub.test_hub import HubCase, one_unit, until


class AllowanceCase(HubCase):
    async def busy(self, wallets: HubWallets, settler: Settler, user: int, key: int | None,
                   prefix: str) -> None:
        """``BUSY_AFTER`` calls admitted by the hub and settled at one unit each; then the
        allowance the worker asked for has arrived."""
        for i in range(BUSY_AFTER):
            reservation = await wallets.reserve(f"{prefix}{i}", user, key, UNIT)
            self.settle(settler, reservation, user, key)
        await settler.flush()
        # the hub granted it, and the worker heard
        await until(lambda: wallets.allowance_nanos(user, key) > 0)
        assert self.allowance(wallets, user, key) == wallets.allowance_nanos(user, key)

    @staticmethod
    def settle(settler: Settler, reservation: Reservation, user: int, key: int | None,
               cost: Any = None) -> Deferred[Any]:
        return settler.settle(reservation, SettlementRecord(
            request_id=reservation.request_id, user_id=user, api_key_id=key,
            cost=one_unit() if cost is None else cost))

    def allowance(self, wallets: HubWallets, user: int, key: int | None) -> int:
        """What the hub holds for this worker's allowance on (user, key)."""
        (connection,) = [c for c in self.hub.connections
                         if c.owner.name == self.owner_names[id(wallets)]]
        hold = connection.owner.allowances.get((user, key))
        return 0 if hold is None else hold.amount

    async def named_worker(self) -> tuple[Any, HubWallets, Settler]:
        before = {c.owner.name for c in self.hub.connections}
        state, wallets, settler = await self.worker()
        await until(lambda: len(self.hub.connections) == len(before) + 1)
        (name,) = {c.owner.name for c in self.hub.connections} - before
        self.owner_names[id(wallets)] = name
        return state, wallets, settler

    def setUp(self) -> None:
        super().setUp()
        self.owner_names: dict[int, str] = {}


class AllowanceTests(AllowanceCase):
    async def test_a_busy_account_is_admitted_without_a_round_trip_to_the_hub(self) -> None:
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user)
        _, a, settle_a = await self.named_worker()
        await self.busy(a, settle_a, user, key, "warm")
        granted = self.allowance(a, user, key)
        # a quarter of what was free at most, and no more than the target asked for
        assert 0 < granted <= min(TARGET_REQUESTS * UNIT, 992 * UNIT // GRANT_SHARE)
        assert self.authority.available_nanos(user) == 992 * UNIT - granted

        d = a.reserve("local", user, key, UNIT)
        assert d.called  # answered in this very turn: no message to the hub and back
        reservation = self.successResultOf(d)
        self.settle(settle_a, reservation, user, key)
        await settle_a.flush()
        await a.hub.barrier()
        # the hub heard only what the batch charged: the hold shrank, the balance moved
        assert await self.balance(user) == 991 * UNIT
        assert self.authority.available_nanos(user) == 991 * UNIT - self.allowance(a, user, key)
        await self.verify_ledger()

    async def test_an_allowance_is_topped_up_when_half_of_its_target_is_used(self) -> None:
        user = await self.add_user(10_000 * UNIT)
        _, a, settle_a = await self.named_worker()
        await self.busy(a, settle_a, user, None, "warm")
        first = self.allowance(a, user, None)
        assert first == TARGET_REQUESTS * UNIT
        in_flight = TARGET_REQUESTS // 2 + 1
        held = [self.successResultOf(a.reserve(f"r{i}", user, None, UNIT))
                for i in range(in_flight)]
        # every reservation was local; the last one left less than half of the target free,
        # and the top-up (asked in the background) makes the free part the target again:
        # twice what is in flight, now that this is more than TARGET_REQUESTS reservations
        await until(lambda: self.allowance(a, user, None) > first)
        assert self.allowance(a, user, None) == in_flight * UNIT + 2 * in_flight * UNIT
        assert a.allowance_nanos(user, None) == self.allowance(a, user, None)
        for reservation in held:
            a.release(reservation)
        await a.hub.barrier()
        # releases of local reservations tell the hub nothing: the allowance holds them
        assert self.authority.available_nanos(user) == (
            9992 * UNIT - self.allowance(a, user, None))

    async def test_exhaustion_two_workers_admit_a_balance_exactly_once(self) -> None:
        """Allowances on both workers, then calls from both until the money is gone: as many
        admitted as one process would admit, none twice, the balance at exactly zero."""
        user = await self.add_user(200 * UNIT)
        key = await self.add_key(user)
        (_, a, settle_a), (_, b, settle_b) = await self.named_worker(), await self.named_worker()
        await self.busy(a, settle_a, user, key, "wa")
        await self.busy(b, settle_b, user, key, "wb")
        assert self.allowance(a, user, key) > 0 and self.allowance(b, user, key) > 0
        admitted: list[tuple[Settler, Reservation]] = []
        for round_number in range(40):
            results = await DeferredList(
                [wallets.reserve(f"{name}{round_number}-{i}", user, key, UNIT)
                 for name, wallets in (("a", a), ("b", b)) for i in range(8)],
                consumeErrors=True)
            for index, (ok, value) in enumerate(results):
                if ok:
                    admitted.append((settle_a if index < 8 else settle_b, value))
                else:
                    assert value.check(InsufficientBalance), value
            if not any(ok for ok, _ in results):
                break
        assert len(admitted) == 184  # 200 - the 16 warm-up calls
        for settler, reservation in admitted:
            self.settle(settler, reservation, user, key)
        await DeferredList([settle_a.flush(), settle_b.flush()])
        assert await self.balance(user) == 0
        logs = await self.logs()
        assert len({row["request_id"] for row in logs}) == len(logs) == 200
        await self.verify_ledger()
        await a.hub.barrier()
        await b.hub.barrier()
        assert self.authority.available_nanos(user) == 0
        for wallets in (a, b):
            with self.assertRaises(InsufficientBalance):
                await wallets.reserve("late", user, key, 1)

    async def test_a_key_quota_at_the_boundary_is_not_overrun_by_allowances(self) -> None:
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user, quota_nanos=50 * UNIT)
        (_, a, settle_a), (_, b, settle_b) = await self.named_worker(), await self.named_worker()
        await self.busy(a, settle_a, user, key, "wa")
        both = await DeferredList([
            Deferred.fromCoroutine(self.reserve_many(a, 40, user, key, UNIT, "a")),
            Deferred.fromCoroutine(self.reserve_many(b, 40, user, key, UNIT, "b"))])
        (_, (admitted_a, refused_a)), (_, (admitted_b, refused_b)) = both
        assert len(admitted_a) + len(admitted_b) == 42  # 50 - 8 warm-up calls
        assert all(f.check(KeyQuotaExceeded) for f in refused_a + refused_b)
        for settler, admitted in ((settle_a, admitted_a), (settle_b, admitted_b)):
            for reservation in admitted:
                self.settle(settler, reservation, user, key)
        await DeferredList([settle_a.flush(), settle_b.flush()])
        assert (await self.key_row(key))["spent_nanos"] == 50 * UNIT
        await self.verify_ledger()

    async def test_an_idle_allowance_is_recalled_for_a_request_it_would_refuse(self) -> None:
        user = await self.add_user(100 * UNIT)
        (_, a, settle_a), (_, b, _) = await self.named_worker(), await self.named_worker()
        await self.busy(a, settle_a, user, None, "wa")
        held = self.allowance(a, user, None)
        assert held > 0
        # b needs everything that is left: a's unused allowance must not refuse it
        reservation = await b.reserve("b-all", user, None, 92 * UNIT)
        assert reservation.amount_nanos == 92 * UNIT
        assert self.allowance(a, user, None) == 0
        after = a.reserve("a-after", user, None, UNIT)
        assert not after.called  # a asks the hub again: nothing is left
        with self.assertRaises(InsufficientBalance):
            await after
        with self.assertRaises(InsufficientBalance):
            await b.reserve("b-more", user, None, 1)

    async def test_drain_gives_every_allowance_back(self) -> None:
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user)
        _, a, settle_a = await self.named_worker()
        await self.busy(a, settle_a, user, key, "wa")
        assert self.allowance(a, user, key) > 0
        await a.stop()
        assert self.allowance(a, user, key) == 0
        assert self.authority.available_nanos(user) == 992 * UNIT

    async def test_a_killed_workers_allowance_is_reclaimed(self) -> None:
        user = await self.add_user(100 * UNIT)
        (state_a, a, settle_a), (_, b, _) = await self.named_worker(), await self.named_worker()
        await self.busy(a, settle_a, user, None, "wa")
        in_flight = self.successResultOf(a.reserve("a-open", user, None, UNIT))
        assert in_flight.held
        state_a._protocol.transport.abortConnection()  # killed: no goodbye, no give-back
        await until(lambda: len(self.hub.connections) == 1)
        # everything the dead worker held, its in-flight call included, is free again
        reservation = await b.reserve("b-all", user, None, 92 * UNIT)
        assert reservation.amount_nanos == 92 * UNIT

    async def test_a_charge_above_its_estimate_moves_the_balance_by_all_of_it(self) -> None:
        user = await self.add_user(100 * UNIT)
        _, a, settle_a = await self.named_worker()
        await self.busy(a, settle_a, user, None, "wa")
        held = self.allowance(a, user, None)
        reservation = self.successResultOf(a.reserve("small", user, None, 1))
        big = one_unit_cost(held // UNIT + 3)  # more than the whole allowance
        self.settle(settle_a, reservation, user, None, cost=big)
        await settle_a.flush()
        await a.hub.barrier()
        balance = await self.balance(user)
        assert balance == 92 * UNIT - big.cost_nanos
        assert self.allowance(a, user, None) == 0
        assert self.authority.available_nanos(user) == balance
        await self.verify_ledger()

    async def test_a_forget_gives_the_allowance_back_and_admits_against_new_numbers(
            self) -> None:
        user = await self.add_user(100 * UNIT)
        _, a, settle_a = await self.named_worker()
        await self.busy(a, settle_a, user, None, "wa")
        assert self.allowance(a, user, None) > 0
        await self.set_balance(user, 0)
        a.forget_user(user)  # what a top-up / an admin edit makes every worker do
        with self.assertRaises(InsufficientBalance):
            await a.reserve("after-edit", user, None, 1)
        assert self.allowance(a, user, None) == 0
