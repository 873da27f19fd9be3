"""``/api/user/subscription`` and ``/api/user/subscription-plans``: listing, resets, buying a
plan from the wallet (debit + ledger + grant in one transaction), renewals, refusals that change
nothing, personal mode, and concurrent purchases by one user on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.invalidation import USERS
from gateway.store import schema
from tests.console.admin_case import AdminCase
from tests.gateway.gateway_case import GatewayTestCase
from tests.support.app import Response

TABLES = ("users", "ledger", "user_subscriptions")
NANOS = 1_000_000_000
PRO = {"name": "pro", "reset_amount": "20", "reset_interval_days": 7, "price": "10",
       "duration_days": 30, "purchasable": True}


class SubscriptionCase(AdminCase):
    async def plan(self, **fields: Any) -> dict[str, Any]:
        response = await self.api("POST", "/api/subscription-plans", {**PRO, **fields})
        assert response.status == 200, response
        return dict(response.json())

    async def member(self, name: str, balance: str) -> tuple[int, str]:
        """A registered user holding ``balance`` in the wallet (an admin adjustment)."""
        await self.admin()
        registered = await self.register(name)
        user_id = int(registered["user"]["id"])
        changed = await self.api("PUT", f"/api/users/{user_id}", {"balance": balance})
        assert changed.status == 200, changed
        return user_id, str(registered["token"])

    async def buy(self, token: str, plan_id: Any) -> Response:
        return await self.call("POST", "/api/user/subscription/purchase", {"plan_id": plan_id},
                               token=token)

    async def table(self, name: str, **where: Any) -> list[dict[str, Any]]:
        table = schema.metadata.tables[name]

        def read(conn: Any) -> list[dict[str, Any]]:
            query = select(table).order_by(table.c.id)
            for column, value in where.items():
                query = query.where(table.c[column] == value)
            return [dict(r) for r in conn.execute(query).mappings()]

        return await self.ctx.db.transaction(read)

    async def wallet(self, user_id: int) -> int:
        """The wallet balance, asserting that it equals the sum of the user's ledger."""
        [user] = await self.table("users", id=user_id)
        rows = await self.table("ledger", user_id=user_id)
        assert user["balance_nanos"] == sum(r["amount_nanos"] for r in rows), rows
        return int(user["balance_nanos"])

    async def refused(self, token: str, method: str, path: str, payload: Any, status: int,
                      message: str | None = None, field: str | None = None) -> None:
        before = await self.snapshot(*TABLES)
        announced = len(self.announced)
        response = await self.call(method, path, payload, token=token)
        assert response.status == status, (payload, response)
        body = response.json()
        if message is not None:
            assert body["error"] == message, body
        if field is not None:
            assert body.get("field") == field, body
        assert await self.snapshot(*TABLES) == before, payload
        assert len(self.announced) == announced


class PurchaseTests(SubscriptionCase):
    async def test_purchase_debits_wallet_grants_and_renewal_extends(self) -> None:
        plan = await self.plan()
        user_id, token = await self.member("alice", "25")
        now = self.ctx.now()
        bought = await self.buy(token, plan["id"])
        assert bought.status == 200, bought
        body = bought.json()
        assert body["balance"] == "15" and body["renewed"] is False
        sub = body["subscription"]
        assert sub["plan"]["id"] == plan["id"] and sub["balance"] == "20"
        assert sub["active_until"] == (now + timedelta(days=30)).isoformat().replace(
            "+00:00", "Z")
        assert (USERS, str(user_id).encode()) in self.announced  # the gateway reloads
        assert await self.wallet(user_id) == 15 * NANOS
        [row] = [r for r in await self.table("ledger", user_id=user_id)
                 if r["kind"] == "subscription_purchase"]
        assert row["amount_nanos"] == -10 * NANOS and row["balance_after_nanos"] == 15 * NANOS
        listed = (await self.call("GET", "/api/user/subscription", token=token)).json()
        assert [s["id"] for s in listed] == [sub["id"]]
        assert listed[0]["plan"]["name"] == "pro" and listed[0]["balance"] == "20"

        self.clock.advance(86400)
        renewed = await self.buy(token, plan["id"])
        assert renewed.status == 200, renewed
        assert renewed.json()["renewed"] is True and renewed.json()["balance"] == "5"
        [stored] = await self.table("user_subscriptions", user_id=user_id)
        assert stored["id"] == sub["id"]
        assert stored["active_until"] == now + timedelta(days=60)  # from the old expiry
        purchases = [r for r in await self.table("ledger", user_id=user_id)
                     if r["kind"] == "subscription_purchase"]
        assert len(purchases) == 2 and len({r["ref"] for r in purchases}) == 2
        assert await self.wallet(user_id) == 5 * NANOS
        # 5 left, the plan costs 10: refused, nothing changes
        await self.refused(token, "POST", "/api/user/subscription/purchase",
                           {"plan_id": plan["id"]}, 402, "Insufficient balance")

    async def test_concurrent_purchases_with_a_wallet_for_one(self) -> None:
        plan = await self.plan()
        user_id, token = await self.member("racer", "10")
        responses = await gatherResults([
            ensureDeferred(self.buy(token, plan["id"])) for _ in range(12)])
        statuses = sorted(r.status for r in responses)
        assert statuses == [200] + [402] * 11, statuses
        assert await self.wallet(user_id) == 0
        assert len(await self.table("user_subscriptions", user_id=user_id)) == 1
        purchases = [r for r in await self.table("ledger", user_id=user_id)
                     if r["kind"] == "subscription_purchase"]
        assert len(purchases) == 1


class PurchasePostgresTests(PurchaseTests):
    backend = "postgresql"


class SubscriptionRouteTests(SubscriptionCase):
    async def test_purchasable_plans_by_price(self) -> None:
        await self.plan(name="big", price="50")
        await self.plan(name="small", price="5")
        await self.plan(name="hidden", purchasable=False, price="1")
        await self.plan(name="off", price="2", enabled=False)
        _, token = await self.member("alice", "0")
        response = await self.call("GET", "/api/user/subscription-plans", token=token)
        assert response.status == 200, response
        assert [(p["name"], p["price"]) for p in response.json()] == [
            ("small", "5"), ("big", "50")]

    async def test_refusals_change_nothing(self) -> None:
        plan = await self.plan()
        forever = await self.plan(name="forever", duration_days=0, price="3")
        hidden = await self.plan(name="hidden", purchasable=False)
        off = await self.plan(name="off", enabled=False)
        user_id, token = await self.member("alice", "8")
        path = "/api/user/subscription/purchase"
        unavailable = "Subscription plan not found or not purchasable"
        for payload in ({"plan_id": hidden["id"]}, {"plan_id": off["id"]}, {"plan_id": 999}):
            await self.refused(token, "POST", path, payload, 400, unavailable, "plan_id")
        for payload in ({}, {"plan_id": "abc"}, {"plan_id": None}, {"plan_id": True}):
            await self.refused(token, "POST", path, payload, 400, field="plan_id")
        await self.refused(token, "POST", path, [1], 400)
        await self.refused(token, "POST", path, {"plan_id": plan["id"]}, 402,
                           "Insufficient balance")
        assert (await self.buy(token, forever["id"])).status == 200
        # an active untimed subscription of the same plan cannot be bought again
        await self.refused(token, "POST", path, {"plan_id": forever["id"]}, 400,
                           "You already have a permanent subscription to this plan", "plan_id")
        assert await self.wallet(user_id) == 5 * NANOS
        anonymous = await self.call("POST", path, {"plan_id": forever["id"]})
        assert anonymous.status == 401

    async def test_listing_applies_due_resets_and_hides_expired(self) -> None:
        plan = await self.plan(reset_interval_days=1, duration_days=3)
        user_id, token = await self.member("alice", "10")
        start = self.ctx.now()
        assert (await self.buy(token, plan["id"])).status == 200
        [sub] = await self.table("user_subscriptions", user_id=user_id)

        def spend(conn: Any) -> None:
            s = schema.user_subscriptions
            conn.execute(update(s).where(s.c.id == sub["id"]).values(balance_nanos=NANOS))

        await self.ctx.db.transaction(spend)
        listed = (await self.call("GET", "/api/user/subscription", token=token)).json()
        assert listed[0]["balance"] == "1"  # not due yet
        self.clock.advance(36 * 3600)
        listed = (await self.call("GET", "/api/user/subscription", token=token)).json()
        assert listed[0]["balance"] == "20"
        [stored] = await self.table("user_subscriptions", user_id=user_id)
        assert stored["balance_nanos"] == 20 * NANOS  # the reset is stored, not only shown
        assert stored["next_reset_at"] == start + timedelta(days=2)
        assert stored["last_reset_at"] == start + timedelta(days=1)
        again = (await self.call("GET", "/api/user/subscription", token=token)).json()
        assert again == listed  # applied once
        self.clock.advance(2 * 86400)
        assert (await self.call("GET", "/api/user/subscription", token=token)).json() == []

    async def test_personal_mode_forbids_every_route(self) -> None:
        plan = await self.plan()
        user_id, token = await self.member("alice", "20")
        await self.ctx.live_settings.save({"system_mode": "personal"}, self.ctx.now())
        for method, path, payload in (
                ("GET", "/api/user/subscription", None),
                ("GET", "/api/user/subscription-plans", None),
                ("POST", "/api/user/subscription/purchase", {"plan_id": plan["id"]})):
            response = await self.call(method, path, payload, token=token)
            assert response.status == 403, (path, response)
            assert response.json()["error"] == "This feature is disabled in personal mode"
        assert await self.wallet(user_id) == 20 * NANOS
        assert await self.table("user_subscriptions") == []


class PurchaseUnlocksGatewayTests(SubscriptionCase, GatewayTestCase):
    """A plan bought with the whole wallet pays for gateway calls from its quota at once."""

    async def test_bought_quota_pays_gateway_calls(self) -> None:
        await self.provision(balance="10")
        self.token = self.admin_token
        plan = await self.plan()
        bought = await self.buy(self.user_token, plan["id"])
        assert bought.status == 200 and bought.json()["balance"] == "0", bought
        response = await self.call(
            "POST", "/v1/chat/completions",
            {"model": "gpt-fake", "max_tokens": 5,
             "messages": [{"role": "user", "content": "hello there"}]},
            headers={"Authorization": f"Bearer {self.api_key}"})
        assert response.status == 200, response
        [row] = await self.usage_rows()
        assert row["subscription_cost_nanos"] > 0
        assert await self.balance_nanos(self.user_id) == 0
        [sub] = await self.table("user_subscriptions", user_id=self.user_id)
        assert sub["balance_nanos"] == 20 * NANOS - row["subscription_cost_nanos"]
