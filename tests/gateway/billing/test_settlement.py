"""Settlement: exactly once, group commit, ledger = balance, wallet floor, retries after failure."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal as D

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError
from twisted.internet.defer import gatherResults

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.usage import Usage
from gateway.ledger.settlement import SettlementFailed, SettlementRecord
from gateway.ledger.wallet import PaymentRequired
from gateway.store import schema
from gateway.store.billing_writes import write_batch
from tests.gateway.billing.ledger_case import NOW, UNIT, LedgerCase

PRICES = PriceSet(input=D("1.25"), output=D(10))


def record(request_id: str, user_id: int, key_id: int | None = None, *, units: int = 1,
           **fields: object) -> SettlementRecord:
    """A settlement costing ``units`` whole units (1 input token at 1M per 1M)."""
    cost = compute_cost(Usage(input=units, output=0), PriceSet(input=D(1_000_000)))
    return SettlementRecord(request_id=request_id, user_id=user_id, api_key_id=key_id,
                            cost=cost, **fields)  # type: ignore[arg-type]


class SettlementTests(LedgerCase):
    async def test_settling_twice_charges_once(self) -> None:
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user)
        r = await self.wallets.reserve("twice", user, key, 2 * UNIT)
        first = self.settler.settle(r, record("twice", user, key, units=2))
        second = self.settler.settle(r, record("twice", user, key, units=2))  # while queued
        await self.settler.flush()
        a, b = await gatherResults([first, second])
        assert a == b and a.charged_nanos == 2 * UNIT and not a.duplicate
        third = await self.settler.settle(r, record("twice", user, key, units=2))  # after commit
        assert third == a
        # a restarted node (fresh memory) settling the same id: the database says no
        restarted = self.new_settler()
        again = restarted.settle(None, record("twice", user, key, units=2))
        await restarted.flush()
        repeat = await again
        assert repeat.duplicate and repeat.charged_nanos == 2 * UNIT
        assert repeat.balance_after_nanos == 8 * UNIT
        assert await self.balance(user) == 8 * UNIT
        assert len(await self.ledger(user)) == 1
        assert await self.count(schema.usage_logs) == 1
        assert (await self.key_row(key))["request_count"] == 1
        assert self.wallets.available_nanos(user) == 8 * UNIT

    async def test_settle_and_forget_charges_once_and_releases_repeats(self) -> None:
        """The /v1 path's way in: no outcome returned, the same exactly-once rules."""
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user)
        first = await self.wallets.reserve("quiet", user, key, 3 * UNIT)
        assert self.settler.settle_and_forget(first, record("quiet", user, key, units=2)) is None
        # a repeat while queued, and one after the commit, each with a reservation of its own
        queued_repeat = await self.wallets.reserve("quiet", user, key, 3 * UNIT)
        self.settler.settle_and_forget(queued_repeat, record("quiet", user, key, units=2))
        waiter = self.settler.settle(None, record("quiet", user, key, units=2))
        await self.settler.flush()
        charge = await waiter
        assert charge.charged_nanos == 2 * UNIT and not charge.duplicate
        late_repeat = await self.wallets.reserve("quiet", user, key, 3 * UNIT)
        self.settler.settle_and_forget(late_repeat, record("quiet", user, key, units=2))
        await self.settler.flush()
        assert await self.balance(user) == 8 * UNIT
        assert len(await self.ledger(user)) == 1
        assert await self.count(schema.usage_logs) == 1
        # every reservation was given back: all 8 remaining units can be reserved
        assert self.wallets.available_nanos(user) == 8 * UNIT

    async def test_a_retried_batch_after_an_ambiguous_commit_applies_nothing_twice(self) -> None:
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=100 * UNIT)
        rows = [record(f"amb{i}", user, key, units=i + 1).row() for i in range(3)]
        first = await self.db.transaction(write_batch, rows, NOW)
        # the commit happened but suppose its acknowledgement was lost: the batch is retried
        second = await self.db.transaction(write_batch, rows, NOW)
        assert [r["charged_nanos"] for r in first] == [UNIT, 2 * UNIT, 3 * UNIT]
        assert [r["charged_nanos"] for r in second] == [UNIT, 2 * UNIT, 3 * UNIT]
        assert all(r["duplicate"] for r in second) and not any(r["duplicate"] for r in first)
        assert [r["balance_after_nanos"] for r in second] == [9 * UNIT, 7 * UNIT, 4 * UNIT]
        assert await self.balance(user) == 4 * UNIT
        assert (await self.key_row(key))["spent_nanos"] == 6 * UNIT
        assert await self.count(schema.ledger) == 3

    async def test_one_transaction_for_a_batch_of_100(self) -> None:
        users = [await self.add_user(1000 * UNIT) for _ in range(5)]
        keys = [await self.add_key(u, quota_nanos=500 * UNIT) for u in users]
        reservations = []
        for i in range(100):
            reservations.append(await self.wallets.reserve(
                f"b{i}", users[i % 5], keys[i % 5], 2 * UNIT))
        before = self.commits
        ds = [self.settler.settle(r, record(r.request_id, r.user_id, r.key_id))
              for r in reservations]
        assert self.commits == before  # nothing written before the batch interval
        self.clock.advance(0.005)
        results = await gatherResults(ds)
        assert self.commits - before == 1
        assert list(self.settler.batch_sizes) == [100]
        assert all(r.charged_nanos == UNIT for r in results)
        for user, key in zip(users, keys):
            assert await self.balance(user) == 980 * UNIT
            row = await self.key_row(key)
            assert row["spent_nanos"] == 20 * UNIT and row["request_count"] == 20
            assert row["last_used_at"] == NOW + timedelta(seconds=0.005)
        assert await self.count(schema.usage_logs) == 100

    async def test_a_full_batch_is_written_without_waiting_for_the_timer(self) -> None:
        settler = self.new_settler(max_batch=10)
        user = await self.add_user(1000 * UNIT)
        ds = [settler.settle(None, record(f"m{i}", user)) for i in range(25)]
        await gatherResults(ds[:20])  # two full batches went at once
        assert list(settler.batch_sizes)[:2] == [10, 10]
        self.clock.advance(0.005)
        await gatherResults(ds)
        assert sum(settler.batch_sizes) == 25

    async def test_ledger_sums_to_the_balance_change_for_every_user(self) -> None:
        rng = random.Random(7)
        users = {await self.add_user(rng.randrange(0, 50) * UNIT): 0 for _ in range(8)}
        initial = {u: await self.balance(u) for u in users}
        ds = []
        for i in range(300):
            user = rng.choice(list(users))
            ds.append(self.settler.settle(None, record(
                f"l{i}", user, units=rng.randrange(0, 4), delivered=rng.random() < 0.7)))
            if i % 37 == 0:
                self.clock.advance(0.005)
        await self.settler.flush()
        await gatherResults(ds)
        for user in users:
            final = await self.balance(user)
            assert final >= 0
            ledger = await self.ledger(user)
            assert sum(row["amount_nanos"] for row in ledger) == final - initial[user]
            if ledger:
                assert ledger[-1]["balance_after_nanos"] == final
        logs = await self.logs()
        assert len(logs) == 300
        charged = sum(row["cost_nanos"] for row in logs)
        assert charged == sum(initial.values()) - sum([await self.balance(u) for u in users])

    async def test_a_delivered_stream_floors_the_wallet_at_zero(self) -> None:
        user = await self.add_user(UNIT)
        charge = self.settler.settle(None, record("floor", user, units=3, is_stream=True,
                                                  delivered=True))
        await self.settler.flush()
        result = await charge
        assert result.cost_nanos == 3 * UNIT and result.charged_nanos == UNIT
        assert result.balance_after_nanos == 0 and result.refused is None
        assert await self.balance(user) == 0
        [entry] = await self.ledger(user)
        assert entry["amount_nanos"] == -UNIT and entry["balance_after_nanos"] == 0
        assert entry["kind"] == "charge" and entry["ref"] == "floor"
        [log] = await self.logs()
        assert log["cost_nanos"] == UNIT and "floored" in log["pricing_formula"]
        # an empty wallet is charged nothing more, and never goes negative
        again = self.settler.settle(None, record("floor2", user, units=1))
        await self.settler.flush()
        assert (await again).charged_nanos == 0
        assert await self.balance(user) == 0
        assert len(await self.ledger(user)) == 1

    async def test_an_undelivered_answer_is_refused_when_it_cannot_be_paid(self) -> None:
        user = await self.add_user(2 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        poor = self.settler.settle(None, record("nd1", user, key, units=3, delivered=False))
        await self.settler.flush()
        result = await poor
        assert result.refused == "Insufficient balance" and result.charged_nanos == 0
        assert await self.balance(user) == 2 * UNIT
        await self.db.transaction(lambda conn: conn.execute(
            schema.api_keys.update().values(spent_nanos=9 * UNIT)))
        over = self.settler.settle(None, record("nd2", user, key, units=2, delivered=False))
        await self.settler.flush()
        assert (await over).refused == "API key quota exceeded"
        ok = self.settler.settle(None, record("nd3", user, key, units=1, delivered=False))
        await self.settler.flush()
        assert (await ok).charged_nanos == UNIT
        logs = await self.logs()
        assert [(r["status"], r["cost_nanos"]) for r in logs] == [(402, 0), (402, 0), (200, UNIT)]
        assert logs[0]["error_message"] == "Insufficient balance"
        assert await self.balance(user) == UNIT

    async def test_a_zero_cost_failure_is_logged_through_the_same_path(self) -> None:
        user = await self.add_user(5 * UNIT)
        key = await self.add_key(user)
        r = await self.wallets.reserve("fail", user, key, 2 * UNIT)
        d = self.settler.settle(r, SettlementRecord(
            request_id="fail", user_id=user, api_key_id=key, status=502,
            error_message="x" * 2000, model_name="m" * 300, endpoint="/v1/chat/completions",
            channel_id=7, user_channel_id=3, response_time_ms=120))
        await self.settler.flush()
        result = await d
        assert result.charged_nanos == 0 and result.cost_nanos == 0
        [log] = await self.logs()
        assert log["status"] == 502 and log["cost_nanos"] == 0
        assert log["error_message"] == "x" * 512 and log["model_name"] == "m" * 200
        assert (log["channel_id"], log["user_channel_id"], log["response_time_ms"]) == (7, 3, 120)
        assert await self.count(schema.ledger) == 0
        assert (await self.key_row(key))["request_count"] == 1
        assert self.wallets.available_nanos(user) == 5 * UNIT

    async def test_the_usage_log_row_explains_the_charge(self) -> None:
        user = await self.add_user(10 * UNIT)
        cost = compute_cost(Usage(input=1000, output=500, cache_read=200), PRICES,
                            D("0.8"), D("1.5"))
        d = self.settler.settle(None, SettlementRecord(
            request_id="explain", user_id=user, cost=cost,
            usage=Usage(input=1000, output=500, cache_read=200),
            prices=PRICES.as_json(), model_name="m1", is_stream=True, first_response_time_ms=9))
        await self.settler.flush()
        await d
        [log] = await self.logs()
        # (800 * 1.25 + 500 * 10) / 1M = 0.006; * 0.8 * 1.5 = 0.0072
        assert log["base_cost_nanos"] == 6_000_000 and log["cost_nanos"] == 7_200_000
        assert log["group_multiplier_nanos"] == 800_000_000
        assert log["user_channel_multiplier_nanos"] == 1_500_000_000
        assert (log["input_tokens"], log["output_tokens"], log["cached_input_tokens"]) == (
            1000, 500, 200)
        assert log["prices"]["input_price"] == "1.25" and log["is_stream"] is True
        assert "group 0.8 * channel 1.5" in log["pricing_formula"]

    async def test_concurrent_settlements_never_overdraw(self) -> None:
        user = await self.add_user(10 * UNIT)
        key = await self.add_key(user, quota_nanos=10 * UNIT)
        admitted = []
        for i in range(40):
            try:
                admitted.append(await self.wallets.reserve(f"c{i}", user, key, UNIT))
            except PaymentRequired:
                continue
        assert len(admitted) == 10
        ds = [self.settler.settle(r, record(r.request_id, user, key, units=1)) for r in admitted]
        await self.settler.flush()
        await gatherResults(ds)
        assert await self.balance(user) == 0
        assert (await self.key_row(key))["spent_nanos"] == 10 * UNIT


class PostgresSettlementTests(SettlementTests):
    backend = "postgresql"


class SettlementFailureTests(LedgerCase):
    """SQLite only: its single DB thread makes the order of failure and repair deterministic."""

    async def test_a_failed_batch_is_retried_until_it_commits_once(self) -> None:
        user = await self.add_user(10 * UNIT)
        await self.db.transaction(lambda conn: conn.exec_driver_sql(
            "ALTER TABLE usage_logs RENAME TO usage_logs_away"))
        d = self.settler.settle(None, record("retry", user, units=2))
        flushed = self.settler.flush()
        # queued behind the failing batch on the single DB thread
        await self.db.transaction(lambda conn: conn.exec_driver_sql(
            "ALTER TABLE usage_logs_away RENAME TO usage_logs"))
        assert not d.called and not flushed.called
        assert await self.balance(user) == 10 * UNIT  # the failed batch left nothing behind
        self.clock.advance(self.settler.retry_base)
        await flushed
        result = await d
        assert result.charged_nanos == 2 * UNIT
        assert await self.balance(user) == 8 * UNIT
        assert len(await self.ledger(user)) == 1
        assert self.flushLoggedErrors(OperationalError)  # each failed attempt was logged

    async def test_a_bad_record_is_isolated_and_the_rest_commit(self) -> None:
        settler = self.new_settler(retry_base=0.01, retry_cap=0.01, split_after=2,
                                   give_up_after=3)
        user = await self.add_user(10 * UNIT)
        good = [settler.settle(None, record(f"g{i}", user)) for i in range(3)]
        # model_name None violates NOT NULL: an error no retry can fix
        bad = settler.settle(None, record("bad", user, model_name=None))
        good.append(settler.settle(None, record("g3", user)))
        flushed = settler.flush()
        for _ in range(40):
            if flushed.called:
                break
            await self.db.transaction(lambda conn: None)  # let the DB thread run its queue
            self.clock.advance(0.01)
        assert flushed.called
        results = await gatherResults(good)
        assert all(r.charged_nanos == UNIT for r in results)
        with self.assertRaises(SettlementFailed):
            await bad
        assert await self.balance(user) == 6 * UNIT
        refs = await self.db.transaction(lambda conn: [r for (r,) in conn.execute(
            select(schema.ledger.c.ref).where(schema.ledger.c.kind == "charge")
            .order_by(schema.ledger.c.ref))])
        assert refs == ["g0", "g1", "g2", "g3"]
        assert self.wallets.available_nanos(user) == 6 * UNIT
        assert self.flushLoggedErrors(IntegrityError)
