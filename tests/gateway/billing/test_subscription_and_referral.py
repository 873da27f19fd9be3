"""Settlement with subscriptions (quota first, then wallet) and referral commissions."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal as D
from typing import Any

from sqlalchemy import select, update

from gateway.billing.cost import PriceSet, compute_cost
from gateway.billing.subscriptions import Quota, current, remaining, spending_order, split
from gateway.billing.usage import Usage
from gateway.invalidation import USERS
from gateway.ledger.settlement import SettledCharge, SettlementRecord
from gateway.ledger.wallet import PaymentRequired
from gateway.store import schema
from gateway.store.upsert import upsert_setting
from tests.gateway.billing.ledger_case import NOW, UNIT, LedgerCase
from tests.gateway.gateway_case import GatewayTestCase

TENTH = UNIT // 10


def record(request_id: str, user_id: int, tenths: int, **fields: Any) -> SettlementRecord:
    """A settlement costing ``tenths`` x 0.1 units."""
    cost = compute_cost(Usage(input=tenths, output=0), PriceSet(input=D(100_000)))
    return SettlementRecord(request_id=request_id, user_id=user_id, cost=cost, **fields)


class SubscriptionCase(LedgerCase):
    async def add_plan(self, reset_tenths: int, interval_days: int = 30,
                       enabled: bool = True) -> int:
        def insert(conn: Any) -> int:
            key = conn.execute(schema.subscription_plans.insert().values(
                name=f"plan-{reset_tenths}-{interval_days}-{enabled}-{id(conn)}",
                reset_amount_nanos=reset_tenths * TENTH, reset_interval_days=interval_days,
                enabled=enabled, created_at=NOW, updated_at=NOW)).inserted_primary_key
            return int(key[0])
        return await self.db.transaction(insert)

    async def add_subscription(self, user_id: int, plan_id: int, balance_tenths: int, *,
                               active_until: datetime | None = None,
                               next_reset_at: datetime | None = None) -> int:
        def insert(conn: Any) -> int:
            key = conn.execute(schema.user_subscriptions.insert().values(
                user_id=user_id, plan_id=plan_id, balance_nanos=balance_tenths * TENTH,
                active_until=active_until, next_reset_at=next_reset_at or NOW + timedelta(
                    days=30), created_at=NOW, updated_at=NOW)).inserted_primary_key
            return int(key[0])
        return await self.db.transaction(insert)

    async def subscription(self, sub_id: int) -> dict[str, Any]:
        return await self.db.transaction(lambda conn: dict(conn.execute(
            select(schema.user_subscriptions).where(schema.user_subscriptions.c.id == sub_id)
        ).mappings().one()))

    async def settle(self, *records: SettlementRecord) -> list[SettledCharge]:
        ds = [self.settler.settle(None, r) for r in records]
        await self.settler.flush()
        return [await d for d in ds]

    async def assert_ledger_matches(self, user_id: int, start_nanos: int) -> int:
        balance = await self.balance(user_id)
        assert balance - start_nanos == sum(r["amount_nanos"] for r in await self.ledger(user_id))
        return balance

    async def enable_referral(self, rate: str) -> None:
        def write(conn: Any) -> None:
            upsert_setting(conn, "referral_enabled", "true", NOW)
            upsert_setting(conn, "referral_commission_rate", rate, NOW)
        await self.db.transaction(write)

    async def invite(self, inviter: int, invitee: int) -> None:
        await self.db.transaction(lambda conn: conn.execute(
            update(schema.users).where(schema.users.c.id == invitee).values(
                referrer_id=inviter)))


class SubscriptionSettlementTests(SubscriptionCase):
    async def test_quota_first_then_wallet_split_in_usage_log(self) -> None:
        user = await self.add_user(5 * UNIT)
        sub = await self.add_subscription(user, await self.add_plan(10), 10)
        [charge] = await self.settle(record("s1", user, 15))
        assert charge.charged_nanos == 15 * TENTH and charge.balance_after_nanos == 45 * TENTH
        assert (await self.subscription(sub))["balance_nanos"] == 0
        [log] = await self.logs()
        assert log["cost_nanos"] == 15 * TENTH and log["subscription_cost_nanos"] == 10 * TENTH
        [row] = await self.ledger(user)
        assert row["kind"] == "charge" and row["amount_nanos"] == -5 * TENTH
        assert row["balance_after_nanos"] == 45 * TENTH
        assert await self.assert_ledger_matches(user, 5 * UNIT) == 45 * TENTH
        assert self.wallets.available_nanos(user) == 45 * TENTH

    async def test_subscriber_with_empty_wallet_is_admitted_up_to_the_quota(self) -> None:
        user = await self.add_user(0)
        sub = await self.add_subscription(user, await self.add_plan(10), 10)
        first = await self.wallets.reserve("a1", user, None, 6 * TENTH, jwt=True)
        with self.assertRaises(PaymentRequired):
            await self.wallets.reserve("a2", user, None, 5 * TENTH, jwt=True)
        charge = self.settler.settle(first, record("a1", user, 4))
        await self.settler.flush()
        assert (await charge).balance_after_nanos == 6 * TENTH  # wallet 0 + quota 0.6
        assert self.wallets.available_nanos(user) == 6 * TENTH
        assert (await self.subscription(sub))["balance_nanos"] == 6 * TENTH
        assert await self.balance(user) == 0 and await self.ledger(user) == []
        await self.wallets.reserve("a3", user, None, 6 * TENTH, jwt=True)

    async def test_covered_by_quota_leaves_wallet_and_ledger_alone(self) -> None:
        user = await self.add_user(UNIT)
        sub = await self.add_subscription(user, await self.add_plan(10), 10)
        await self.settle(record("q1", user, 3), record("q2", user, 4))
        assert (await self.subscription(sub))["balance_nanos"] == 3 * TENTH
        assert await self.balance(user) == UNIT and await self.ledger(user) == []
        assert [log["subscription_cost_nanos"] for log in await self.logs()] == [
            3 * TENTH, 4 * TENTH]

    async def test_expiring_soonest_first_never_expiring_last_expired_never(self) -> None:
        user = await self.add_user(UNIT)
        plan = await self.add_plan(10)
        forever = await self.add_subscription(user, plan, 5)
        later = await self.add_subscription(user, plan, 5, active_until=NOW + timedelta(days=9))
        soon = await self.add_subscription(user, plan, 5, active_until=NOW + timedelta(days=2))
        gone = await self.add_subscription(user, plan, 5, active_until=NOW - timedelta(days=1))
        await self.settle(record("o1", user, 12))
        balances = [(await self.subscription(s))["balance_nanos"]
                    for s in (soon, later, forever, gone)]
        assert balances == [0, 0, 3 * TENTH, 5 * TENTH]
        assert await self.balance(user) == UNIT

    async def test_due_reset_refills_before_the_charge(self) -> None:
        user = await self.add_user(UNIT)
        due = NOW - timedelta(days=65)  # three 30-day boundaries have passed: -65, -35, -5
        sub = await self.add_subscription(user, await self.add_plan(8), 1, next_reset_at=due)
        await self.settle(record("r1", user, 3))
        row = await self.subscription(sub)
        assert row["balance_nanos"] == 5 * TENTH  # set to 0.8 (not 0.1 + 0.8), then 0.3 spent
        assert row["last_reset_at"] == NOW - timedelta(days=5)
        assert row["next_reset_at"] == NOW + timedelta(days=25)

    async def test_disabled_plan_is_not_refilled(self) -> None:
        user = await self.add_user(UNIT)
        sub = await self.add_subscription(user, await self.add_plan(8, enabled=False), 1,
                                          next_reset_at=NOW - timedelta(days=1))
        await self.settle(record("d1", user, 3))
        assert (await self.subscription(sub))["balance_nanos"] == 0
        assert await self.balance(user) == 8 * TENTH

    async def test_undelivered_refused_when_quota_and_wallet_cannot_pay(self) -> None:
        user = await self.add_user(2 * TENTH)
        sub = await self.add_subscription(user, await self.add_plan(10), 3)
        [refused] = await self.settle(record("u1", user, 6, delivered=False))
        assert refused.refused == "Insufficient balance" and refused.charged_nanos == 0
        assert (await self.subscription(sub))["balance_nanos"] == 3 * TENTH
        [ok] = await self.settle(record("u2", user, 5, delivered=False))
        assert ok.refused is None and ok.charged_nanos == 5 * TENTH
        assert await self.balance(user) == 0
        [delivered] = await self.settle(record("u3", user, 4))  # delivered: floored at zero
        assert delivered.charged_nanos == 0

    def test_pure_rules(self) -> None:
        quota = Quota(id=1, balance_nanos=5, next_reset_at=NOW, active_until=None,
                      last_reset_at=None, reset_amount_nanos=9, reset_interval_days=7)
        assert current(quota, NOW - timedelta(seconds=1)) is quota
        assert current(quota, NOW).balance_nanos == 9
        assert current(quota, NOW).next_reset_at == NOW + timedelta(days=7)
        ended = Quota(id=2, balance_nanos=4, next_reset_at=NOW + timedelta(days=1),
                      active_until=NOW, last_reset_at=None, reset_amount_nanos=4,
                      reset_interval_days=7)
        assert remaining([quota, ended], NOW) == 9
        assert [q.id for q in spending_order([quota, ended])] == [2, 1]
        assert split(7, [ended, quota]) == ([(2, 4), (1, 3)], 0)
        assert split(20, [ended, quota]) == ([(2, 4), (1, 5)], 11)


class ReferralSettlementTests(SubscriptionCase):
    async def test_commission_on_wallet_spend_once(self) -> None:
        await self.enable_referral("10")  # > 1 reads as a percentage
        inviter = await self.add_user(UNIT)
        invitee = await self.add_user(10 * UNIT)
        await self.invite(inviter, invitee)
        await self.add_subscription(invitee, await self.add_plan(10), 5)
        await self.settle(record("c1", invitee, 20))  # 0.5 from quota, 1.5 from the wallet
        [row] = await self.ledger(inviter)
        assert row["kind"] == "referral" and row["ref"] == "referral:c1"
        assert row["amount_nanos"] == 15 * TENTH // 10
        assert await self.assert_ledger_matches(inviter, UNIT) == UNIT + 15 * TENTH // 10
        assert await self.assert_ledger_matches(invitee, 10 * UNIT) == 85 * TENTH
        # the same request again on a restarted node: no second commission
        restarted = self.new_settler()
        again = restarted.settle(None, record("c1", invitee, 20))
        await restarted.flush()
        assert (await again).duplicate
        assert len(await self.ledger(inviter)) == 1
        commissions = await self.db.transaction(lambda conn: [dict(r) for r in conn.execute(
            select(schema.referral_commissions)).mappings()])
        assert [(c["referrer_id"], c["referred_user_id"], c["base_cost_nanos"],
                 c["amount_nanos"]) for c in commissions] == [
            (inviter, invitee, 15 * TENTH, 15 * TENTH // 10)]

    async def test_inviter_and_invitee_in_one_batch(self) -> None:
        await self.enable_referral("0.5")
        inviter = await self.add_user(0)
        invitee = await self.add_user(UNIT)
        await self.invite(inviter, invitee)
        # the inviter's own call comes after the commission that pays for it, in one batch
        charges = await self.settle(record("b1", invitee, 4),
                                    record("b2", inviter, 2, delivered=False))
        assert charges[1].refused is None and charges[1].charged_nanos == 2 * TENTH
        assert await self.assert_ledger_matches(inviter, 0) == 0
        assert [r["kind"] for r in await self.ledger(inviter)] == ["referral", "charge"]
        assert await self.assert_ledger_matches(invitee, UNIT) == 6 * TENTH

    async def test_no_commission_when_disabled_or_quota_paid(self) -> None:
        inviter = await self.add_user(0)
        invitee = await self.add_user(UNIT)
        await self.invite(inviter, invitee)
        await self.settle(record("n1", invitee, 2))  # referral_enabled is off
        await self.enable_referral("0.2")
        await self.add_subscription(invitee, await self.add_plan(10), 5)
        await self.settle(record("n2", invitee, 3))  # all from the subscription quota
        assert await self.ledger(inviter) == [] and await self.balance(inviter) == 0
        await self.enable_referral("0")
        await self.settle(record("n3", invitee, 9))
        assert await self.ledger(inviter) == []


class PostgresSubscriptionSettlementTests(SubscriptionSettlementTests):
    backend = "postgresql"


class PostgresReferralSettlementTests(ReferralSettlementTests):
    backend = "postgresql"


class SubscriberGatewayCallTests(GatewayTestCase):
    """Through the real /v1 route: a plan granted by a redeem code pays before the wallet."""

    async def test_subscriber_call_draws_quota_then_wallet(self) -> None:
        await self.provision(balance="0")
        admin = self.admin_token
        plan = (await self.call("POST", "/api/subscription-plans", {
            "name": "pro", "reset_amount": "50", "reset_interval_days": 30},
            token=admin)).json()
        code = (await self.call("POST", "/api/redeem-codes", {
            "subscription_plan_id": plan["id"]}, token=admin)).json()
        redeemed = await self.call("POST", "/api/user/redeem-code", {"code": code["code"]},
                                   token=self.user_token)
        assert redeemed.status == 200, redeemed
        chat = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}
        headers = {"Authorization": f"Bearer {self.api_key}"}
        first = await self.call("POST", "/v1/chat/completions", chat, headers=headers)
        assert first.status == 200, first  # admitted on the quota alone (wallet is 0)
        [log] = await self.usage_rows()
        cost = log["cost_nanos"]
        assert cost > 0 and log["subscription_cost_nanos"] == cost
        assert await self.balance_nanos(self.user_id) == 0

        fund = 100 * UNIT  # above the worst-case reservation of a call

        def squeeze(conn: Any) -> None:  # leave half a call's quota, fund the wallet
            conn.execute(update(schema.user_subscriptions).values(balance_nanos=cost // 2))
            conn.execute(update(schema.users).where(schema.users.c.id == self.user_id)
                         .values(balance_nanos=fund))
            conn.execute(schema.ledger.insert().values(
                user_id=self.user_id, kind="admin_adjust", amount_nanos=fund,
                balance_after_nanos=fund, created_at=self.ctx.now()))

        await self.ctx.db.transaction(squeeze)
        await self.ctx.invalidation.announce(USERS, str(self.user_id).encode())
        second = await self.call("POST", "/v1/chat/completions", chat, headers=headers)
        assert second.status == 200, second
        log = (await self.usage_rows())[-1]
        assert log["cost_nanos"] == cost and log["subscription_cost_nanos"] == cost // 2
        assert await self.balance_nanos(self.user_id) == fund - (cost - cost // 2)
        assert await self.ledger_sum(self.user_id) == fund - (cost - cost // 2)
