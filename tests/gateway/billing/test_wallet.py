"""In-memory reservations: atomic admission, one load per account, forgetting without loss."""

from __future__ import annotations

from decimal import Decimal as D

from sqlalchemy import delete
from twisted.internet.defer import DeferredList

from gateway.billing.cost import Cost, PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementRecord
from gateway.ledger.wallet import InsufficientBalance, KeyQuotaExceeded
from gateway.store import schema
from tests.gateway.billing.ledger_case import UNIT, LedgerCase

ONE_UNIT = PriceSet(input=D(1_000_000))  # one input token costs 1 unit


def one_unit_cost(tokens: int = 1) -> Cost:
    return compute_cost(Usage(input=tokens), ONE_UNIT)


class WalletTests(LedgerCase):
    async def reserve_many(self, n: int, user_id: int, key_id: int | None, amount: int,
                           prefix: str = "r") -> tuple[list, list]:
        ds = [self.wallets.reserve(f"{prefix}{i}", user_id, key_id, amount) for i in range(n)]
        results = await DeferredList(ds, consumeErrors=True)
        admitted = [value for ok, value in results if ok]
        refused = [value for ok, value in results if not ok]
        return admitted, refused

    async def test_200_concurrent_reservations_against_a_quota_for_10(self) -> None:
        user = await self.add_user(1000 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        before = self.commits
        admitted, refused = await self.reserve_many(200, user, key, UNIT)
        assert len(admitted) == 10
        assert len(refused) == 190
        assert all(f.check(KeyQuotaExceeded) for f in refused)
        assert str(refused[0].value) == "API key quota exceeded"
        assert refused[0].value.status == 402
        # one load of the user and one of the key, however many callers waited
        assert self.commits - before == 2
        assert self.wallets.key_used_nanos(key) == 10 * UNIT
        # refusals left no trace on the wallet
        assert self.wallets.available_nanos(user) == 990 * UNIT
        # settle them all at one unit: quota used up exactly, never negative
        for reservation in admitted:
            self.settler.settle(reservation, SettlementRecord(
                request_id=reservation.request_id, user_id=user, api_key_id=key,
                cost=one_unit_cost()))
        await self.settler.flush()
        row = await self.key_row(key)
        assert row["spent_nanos"] == 10 * UNIT and row["request_count"] == 10
        assert await self.balance(user) == 990 * UNIT
        with self.assertRaises(KeyQuotaExceeded):
            await self.wallets.reserve("late", user, key, 1)

    async def test_balance_admits_only_what_it_covers_and_release_frees_it(self) -> None:
        user = await self.add_user(5 * UNIT)
        admitted, refused = await self.reserve_many(20, user, None, UNIT)
        assert len(admitted) == 5 and len(refused) == 15
        assert all(f.check(InsufficientBalance) for f in refused)
        assert str(refused[0].value) == "Insufficient balance"
        assert self.wallets.available_nanos(user) == 0
        self.wallets.release(admitted[0])
        self.wallets.release(admitted[0])  # idempotent
        assert self.wallets.available_nanos(user) == UNIT
        again = await self.wallets.reserve("again", user, None, UNIT)
        assert again.amount_nanos == UNIT
        with self.assertRaises(InsufficientBalance):
            await self.wallets.reserve("more", user, None, 1)

    async def test_a_key_refusal_reserves_nothing_from_the_wallet(self) -> None:
        user = await self.add_user(100 * UNIT)
        key = await self.add_key(user, quota_nanos=3 * UNIT)
        with self.assertRaises(KeyQuotaExceeded):
            await self.wallets.reserve("big", user, key, 4 * UNIT)
        assert self.wallets.available_nanos(user) == 100 * UNIT
        assert self.wallets.reserved_nanos(user) == 0
        # the wallet is checked first: no key reservation when the wallet refuses
        poor = await self.add_user(UNIT)
        poor_key = await self.add_key(poor, quota_nanos=10 * UNIT)
        with self.assertRaises(InsufficientBalance):
            await self.wallets.reserve("p", poor, poor_key, 2 * UNIT)
        assert self.wallets.key_used_nanos(poor_key) == 0

    async def test_zero_quota_is_unlimited_and_jwt_callers_skip_the_key(self) -> None:
        user = await self.add_user(100 * UNIT)
        unlimited = await self.add_key(user, quota_nanos=0)
        assert (await self.wallets.reserve("a", user, unlimited, 60 * UNIT)).key_id == unlimited
        capped = await self.add_key(user, quota_nanos=UNIT)
        by_jwt = await self.wallets.reserve("b", user, capped, 30 * UNIT, jwt=True)
        assert by_jwt.key_id is None
        assert self.wallets.key_used_nanos(capped) is None  # never even loaded

    async def test_reserve_now_answers_from_memory_only(self) -> None:
        """The /v1 path's Deferred-free admission: None until the balances are loaded (it
        loads nothing), then the same admission as ``reserve`` -- the same reservation, the
        same refusals, nothing held by a refusal."""
        user = await self.add_user(3 * UNIT)
        key = await self.add_key(user, quota_nanos=2 * UNIT)
        before = self.commits
        assert self.wallets.reserve_now("n0", user, key, UNIT) is None
        assert self.commits == before and self.wallets.reserved_nanos(user) == 0
        first = await self.wallets.reserve("n0", user, key, UNIT)  # loads both
        held = self.wallets.reserve_now("n1", user, key, UNIT)
        assert held is not None and (held.request_id, held.user_id, held.key_id,
                                     held.amount_nanos) == ("n1", user, key, UNIT)
        assert self.wallets.reserved_nanos(user) == 2 * UNIT
        assert self.wallets.key_used_nanos(key) == 2 * UNIT
        with self.assertRaises(KeyQuotaExceeded):
            self.wallets.reserve_now("n2", user, key, 1)
        with self.assertRaises(ValueError):
            self.wallets.reserve_now("n1", user, None, 1)
        by_jwt = self.wallets.reserve_now("n3", user, key, UNIT, jwt=True)
        assert by_jwt is not None and by_jwt.key_id is None
        with self.assertRaises(InsufficientBalance):
            self.wallets.reserve_now("n4", user, None, 1)
        assert self.wallets.reserved_nanos(user) == 3 * UNIT
        for reservation in (first, held, by_jwt):
            self.wallets.release(reservation)
        assert self.wallets.reserved_nanos(user) == 0
        assert self.wallets.available_nanos(user) == 3 * UNIT

    async def test_a_request_id_holds_one_reservation(self) -> None:
        user = await self.add_user(100 * UNIT)
        await self.wallets.reserve("same", user, None, UNIT)
        with self.assertRaises(ValueError):
            await self.wallets.reserve("same", user, None, UNIT)
        assert self.wallets.reserved_nanos(user) == UNIT

    async def test_forget_user_reloads_without_losing_reservations(self) -> None:
        user = await self.add_user(100 * UNIT)
        held = await self.wallets.reserve("held", user, None, 30 * UNIT)
        await self.set_balance(user, 50 * UNIT)  # an admin edit elsewhere
        assert self.wallets.available_nanos(user) == 70 * UNIT  # stale until told
        self.wallets.forget_user(user)
        assert self.wallets.available_nanos(user) is None
        await self.wallets.reserve("next", user, None, 10 * UNIT)
        assert self.wallets.available_nanos(user) == 10 * UNIT  # 50 - 30 - 10
        with self.assertRaises(InsufficientBalance):
            await self.wallets.reserve("over", user, None, 11 * UNIT)
        self.wallets.release(held)
        assert self.wallets.available_nanos(user) == 40 * UNIT

    async def test_forget_during_a_load_loads_again(self) -> None:
        user = await self.add_user(100 * UNIT)
        before = self.commits
        pending = self.wallets.reserve("r", user, None, UNIT)
        self.wallets.forget_user(user)  # the load in flight may predate an outside change
        await pending
        assert self.commits - before == 2

    async def test_forget_key_reloads_quota_and_spent(self) -> None:
        user = await self.add_user(100 * UNIT)
        key = await self.add_key(user, quota_nanos=5 * UNIT)
        held = await self.wallets.reserve("h", user, key, 2 * UNIT)
        await self.db.transaction(lambda conn: conn.execute(
            schema.api_keys.update().where(schema.api_keys.c.id == key)
            .values(quota_limit_nanos=3 * UNIT)))
        self.wallets.forget_key(key)
        with self.assertRaises(KeyQuotaExceeded):
            await self.wallets.reserve("x", user, key, 2 * UNIT)
        await self.wallets.reserve("y", user, key, UNIT)
        assert self.wallets.key_used_nanos(key) == 3 * UNIT
        self.wallets.release(held)
        assert self.wallets.key_used_nanos(key) == UNIT

    async def test_key_quota_comes_from_spent_not_from_logs(self) -> None:
        user = await self.add_user(100 * UNIT)
        key = await self.add_key(user, quota_nanos=5 * UNIT)
        for i in range(4):
            r = await self.wallets.reserve(f"q{i}", user, key, UNIT)
            self.settler.settle(r, SettlementRecord(request_id=f"q{i}", user_id=user,
                                                    api_key_id=key, cost=one_unit_cost()))
        await self.settler.flush()
        await self.db.transaction(lambda conn: conn.execute(delete(schema.usage_logs)))
        assert await self.count(schema.usage_logs) == 0
        self.wallets.forget_key(key)
        assert (await self.key_row(key))["spent_nanos"] == 4 * UNIT
        with self.assertRaises(KeyQuotaExceeded):
            await self.wallets.reserve("q5", user, key, 2 * UNIT)
        assert self.wallets.key_used_nanos(key) == 4 * UNIT
        await self.wallets.reserve("q6", user, key, UNIT)

    async def test_settlement_keeps_the_cache_current(self) -> None:
        user = await self.add_user(10 * UNIT)
        r = await self.wallets.reserve("s", user, None, 4 * UNIT)
        d = self.settler.settle(r, SettlementRecord(request_id="s", user_id=user,
                                                    cost=one_unit_cost(3)))
        # queued: the reservation became a pending debit of the real cost
        assert self.wallets.reserved_nanos(user) == 0
        assert self.wallets.available_nanos(user) == 7 * UNIT
        await self.settler.flush()
        charge = await d
        assert charge.charged_nanos == 3 * UNIT and charge.balance_after_nanos == 7 * UNIT
        assert self.wallets.available_nanos(user) == 7 * UNIT
        assert await self.balance(user) == 7 * UNIT

    async def test_an_unknown_user_cannot_reserve(self) -> None:
        with self.assertRaises(InsufficientBalance):
            await self.wallets.reserve("ghost", 999_999, None, 1)


class PostgresWalletTests(WalletTests):
    backend = "postgresql"
