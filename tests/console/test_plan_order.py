"""Buying a subscription plan through a payment order (EPay fake on loopback): the order costs
the plan's price, a paid notification grants the plan exactly once however often it is replayed,
and the ledger (a ``topup`` credit and a ``subscription_purchase`` debit) sums to the balance."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.store import orders, schema
from tests.console.payment_case import PaymentCase

NANOS = 1_000_000_000
PRO = {"name": "pro", "reset_amount": "20", "reset_interval_days": 7, "price": "10",
       "duration_days": 30, "purchasable": True}


class PlanOrderCase(PaymentCase):
    async def plan(self, **fields: Any) -> dict[str, Any]:
        if not getattr(self, "_admin", None):
            self._admin = await self.setup_admin()
        response = await self.call("POST", "/api/subscription-plans", {**PRO, **fields},
                                   token=self._admin)
        assert response.status == 200, response
        return dict(response.json())

    async def rows(self, name: str, **where: Any) -> list[dict[str, Any]]:
        table = schema.metadata.tables[name]

        def read(conn: Any) -> list[dict[str, Any]]:
            query = select(table).order_by(table.c.id)
            for column, value in where.items():
                query = query.where(table.c[column] == value)
            return [dict(r) for r in conn.execute(query).mappings()]

        return await self.ctx.db.transaction(read)

    async def user_id(self, token: str) -> int:
        return int((await self.call("GET", "/api/user/me", token=token)).json()["id"])

    async def balanced(self, user_id: int) -> int:
        """The wallet balance, asserting it equals the sum of the user's ledger."""
        [user] = await self.rows("users", id=user_id)
        ledger = await self.rows("ledger", user_id=user_id)
        assert user["balance_nanos"] == sum(r["amount_nanos"] for r in ledger), ledger
        return int(user["balance_nanos"])

    async def paid_plan_order(self, token: str, plan_id: int) -> dict[str, Any]:
        order = await self.order(token, amount=None, subscription_plan_id=plan_id)
        assert await self.epay.open(order["payment_url"]) == 200
        return order


class PlanOrderTests(PlanOrderCase):
    async def test_paid_order_grants_plan_once_and_replays_change_nothing(self) -> None:
        await self.use_epay()
        plan = await self.plan()
        token = await self.user("alice")
        user_id = await self.user_id(token)
        now = self.ctx.now()
        order = await self.paid_plan_order(token, plan["id"])
        assert order["amount"] == "10" and order["rmb_amount"] == "72.00"
        assert order["subscription_plan_id"] == plan["id"]
        notice = self.epay.notification(order["order_no"])
        url = self.notify_url("yipay")
        assert await self.epay.send(url, notice) == (200, "success")
        for _ in range(20):
            assert await self.epay.send(url, notice) == (200, "success")
        replies = await gatherResults([ensureDeferred(self.epay.send(
            url, notice, method="POST" if i % 2 else "GET")) for i in range(20)])
        assert set(replies) == {(200, "success")}
        assert (await self.stored(order["order_no"]))["status"] == orders.PAID
        [sub] = await self.rows("user_subscriptions", user_id=user_id)
        assert sub["plan_id"] == plan["id"] and sub["balance_nanos"] == 20 * NANOS
        assert sub["active_until"] == now + timedelta(days=30)
        assert await self.balanced(user_id) == 0  # bought the plan, not wallet credit
        ledger = await self.rows("ledger", user_id=user_id)
        assert sorted((r["kind"], r["amount_nanos"], r["ref"]) for r in ledger) == [
            ("subscription_purchase", -10 * NANOS, order["order_no"]),
            ("topup", 10 * NANOS, order["order_no"])]
        listed = (await self.call("GET", "/api/user/subscription", token=token)).json()
        assert [s["plan"]["name"] for s in listed] == ["pro"]
        detail = (await self.call("GET", f"/api/user/payment/orders/{order['order_no']}",
                                  token=token)).json()
        assert detail["status"] == "paid" and detail["subscription_plan_id"] == plan["id"]

        # a second paid plan order renews: the same subscription, expiry extended
        second = await self.paid_plan_order(token, plan["id"])
        assert await self.epay.notify(second["order_no"]) == (200, "success")
        [renewed] = await self.rows("user_subscriptions", user_id=user_id)
        assert renewed["id"] == sub["id"]
        assert renewed["active_until"] == now + timedelta(days=60)
        assert await self.balanced(user_id) == 0
        assert len(await self.rows("ledger", user_id=user_id)) == 4

    async def test_order_inputs_must_match_the_plan(self) -> None:
        await self.use_epay(payment_min_recharge_amount="50")
        plan = await self.plan()
        hidden = await self.plan(name="hidden", purchasable=False)
        off = await self.plan(name="off", enabled=False)
        token = await self.user("alice")
        path = "/api/user/payment/orders"
        cases = [
            ({"subscription_plan_id": plan["id"], "amount": "11"},
             "Amount does not match the plan price", "amount"),
            ({"subscription_plan_id": plan["id"], "amount": "abc"},
             "Invalid recharge amount", "amount"),
            ({"subscription_plan_id": hidden["id"]},
             "Subscription plan not found or not purchasable", "subscription_plan_id"),
            ({"subscription_plan_id": off["id"]},
             "Subscription plan not found or not purchasable", "subscription_plan_id"),
            ({"subscription_plan_id": 999},
             "Subscription plan not found or not purchasable", "subscription_plan_id"),
            ({"subscription_plan_id": "x"}, None, "subscription_plan_id"),
        ]
        for extra, message, field in cases:
            response = await self.call("POST", path, {"method": "alipay", **extra},
                                       token=token)
            assert response.status == 400, (extra, response)
            body = response.json()
            if message is not None:
                assert body["error"] == message, body
            assert body.get("field") == field, body
        assert await self.all_orders() == []
        # the plan's price is the amount (the recharge minimum does not apply to plans)
        matching = await self.order(token, amount="10.00", subscription_plan_id=plan["id"])
        assert matching["amount"] == "10"
        [row] = await self.all_orders()
        assert row["subscription_plan_id"] == plan["id"] and row["amount_nanos"] == 10 * NANOS

    async def test_plan_no_longer_grantable_stays_in_the_wallet(self) -> None:
        await self.use_epay()
        forever = await self.plan(name="forever", duration_days=0)
        token = await self.user("alice")
        user_id = await self.user_id(token)
        first = await self.paid_plan_order(token, forever["id"])
        second = await self.paid_plan_order(token, forever["id"])
        assert await self.epay.notify(first["order_no"]) == (200, "success")
        assert len(await self.rows("user_subscriptions", user_id=user_id)) == 1
        # the second order was opened before the first was paid: it cannot grant an untimed
        # plan the user now holds, so the payment becomes a plain top-up
        assert await self.epay.notify(second["order_no"]) == (200, "success")
        assert await self.epay.notify(second["order_no"]) == (200, "success")
        assert len(await self.rows("user_subscriptions", user_id=user_id)) == 1
        assert await self.balanced(user_id) == 10 * NANOS
        refused = await self.call("POST", "/api/user/payment/orders",
                                  {"method": "alipay", "subscription_plan_id": forever["id"]},
                                  token=token)
        assert refused.status == 400
        assert refused.json()["error"] == "You already have a permanent subscription to this plan"

    async def test_top_up_orders_still_credit_the_wallet(self) -> None:
        await self.use_epay()
        await self.plan()
        token = await self.user("alice")
        user_id = await self.user_id(token)
        order = await self.order(token, amount="5")
        assert order["subscription_plan_id"] is None
        await self.epay.open(order["payment_url"])
        assert await self.epay.notify(order["order_no"]) == (200, "success")
        assert await self.balanced(user_id) == 5 * NANOS
        assert await self.rows("user_subscriptions") == []


class PlanOrderPostgresTests(PlanOrderTests):
    backend = "postgresql"
