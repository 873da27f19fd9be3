"""Redeem codes: admin CRUD and batches, redemption rules and effects, throttling, the race."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.invalidation import USERS
from gateway.store import schema
from gateway.store import users as user_store
from tests.console.admin_case import AdminCase

TABLES = ("redeem_codes", "redeem_uses", "ledger", "users", "group_memberships",
          "user_subscriptions")
DAY = 86400


class RedeemCase(AdminCase):
    async def code(self, **fields: Any) -> dict[str, Any]:
        response = await self.api("POST", "/api/redeem-codes", {"amount": "5", **fields})
        assert response.status == 200, response
        return response.json()

    async def make_users(self, count: int) -> list[tuple[int, str]]:
        """``count`` users created straight in the database, with session tokens."""
        await self.admin()
        now = self.ctx.now()

        def create(conn: Any) -> list[dict[str, Any]]:
            ids = [user_store.create_user(conn, username=f"r{n}", email=f"r{n}@example.com",
                                          password_hash=None, now=now) for n in range(count)]
            return [user_store.get_user(conn, i) for i in ids]  # type: ignore[misc]

        users = await self.ctx.db.transaction(create)
        return [(u["id"], self.ctx.issue_token(u)) for u in users]

    async def redeem(self, token: str, code: str) -> Any:
        return await self.call("POST", "/api/user/redeem-code", {"code": code}, token=token)

    async def table(self, name: str, **where: Any) -> list[dict[str, Any]]:
        table = schema.metadata.tables[name]

        def read(conn: Any) -> list[dict[str, Any]]:
            query = select(table).order_by(table.c.id)
            for column, value in where.items():
                query = query.where(table.c[column] == value)
            return [dict(r) for r in conn.execute(query).mappings()]

        return await self.ctx.db.transaction(read)

    async def balance_is_ledger(self, user_id: int) -> int:
        user = (await self.table("users", id=user_id))[0]
        rows = await self.table("ledger", user_id=user_id)
        assert user["balance_nanos"] == sum(r["amount_nanos"] for r in rows)
        return int(user["balance_nanos"])


class RedeemCodeAdminTests(RedeemCase):
    async def test_create_defaults_update_delete(self) -> None:
        code = await self.code()
        assert len(code["code"]) == 20 and code["code"].isalnum()
        assert code["max_uses"] == 1 and code["used_count"] == 0 and code["enabled"] is True
        assert code["amount"] == "5" and code["expires_at"] is None
        unlimited = await self.code(code="free-for-all", max_uses=0, enabled=False,
                                    expires_at="2030-01-02")
        assert unlimited["code"] == "FREEFORALL" and unlimited["max_uses"] == 0
        assert unlimited["enabled"] is False
        assert unlimited["expires_at"] == "2030-01-02T00:00:00Z"
        listed = (await self.api("GET", "/api/redeem-codes")).json()
        assert {c["id"] for c in listed} == {code["id"], unlimited["id"]}
        updated = await self.api("PUT", f"/api/redeem-codes/{code['id']}",
                                 {"amount": 7, "code": "", "max_uses": 3})
        assert updated.status == 200, updated
        assert updated.json()["code"] == code["code"] and updated.json()["amount"] == "7"
        assert updated.json()["max_uses"] == 3
        shown = (await self.api("GET", f"/api/redeem-codes/{code['id']}")).json()
        assert shown["amount"] == "7"
        deleted = await self.api("DELETE", f"/api/redeem-codes/{code['id']}")
        assert deleted.json() == {"message": "Redeem code deleted"}
        assert (await self.api("GET", f"/api/redeem-codes/{code['id']}")).status == 404

    async def test_batch_creation(self) -> None:
        response = await self.api("POST", "/api/redeem-codes",
                                  {"count": 25, "prefix": "vip-", "amount": "1.5",
                                   "max_uses": 1})
        assert response.status == 200, response
        body = response.json()
        assert len(body["codes"]) == 25 and len(set(body["codes"])) == 25
        assert all(c.startswith("VIP") and len(c) == 19 for c in body["codes"])
        assert all(item["amount"] == "1.5" for item in body["items"])
        assert len(await self.table("redeem_codes")) == 25

    async def test_bad_inputs_change_nothing(self) -> None:
        await self.code(code="TAKEN")
        group = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        plan = (await self.api("POST", "/api/subscription-plans", {
            "name": "off", "reset_amount": 1, "reset_interval_days": 1,
            "enabled": False})).json()
        cases: list[tuple[dict[str, Any], str | None, str | None]] = [
            ({}, "amount", "Amount, group, or subscription plan is required"),
            ({"amount": "0"}, "amount", None),
            ({"amount": "-1"}, "amount", "Amount must not be negative"),
            ({"amount": "abc"}, "amount", None),
            ({"amount": 1, "max_uses": -1}, "max_uses", None),
            ({"amount": 1, "group_id": 999}, "group_id", "Group not found"),
            ({"amount": 1, "subscription_plan_id": plan["id"]}, "subscription_plan_id",
             "Subscription plan not found or disabled"),
            ({"amount": 1, "subscription_plan_id": 999}, "subscription_plan_id", None),
            ({"group_id": group["id"], "group_duration_days": -1}, "group_duration_days", None),
            ({"amount": 1, "expires_at": "next week"}, "expires_at", "Invalid expiration time"),
            ({"amount": 1, "count": 0}, "count", None),
            ({"amount": 1, "count": 1001}, "count", None),
            ({"amount": 1, "count": 2, "prefix": "a/b"}, "prefix", None),
            ({"amount": 1, "code": "x" * 65}, "code", None),
            ({"amount": 1, "enabled": "yes"}, "enabled", None),
        ]
        for payload, field, message in cases:
            await self.assert_refused("POST", "/api/redeem-codes", payload, 400, TABLES,
                                      field=field, message=message)
        await self.assert_refused("POST", "/api/redeem-codes", {"amount": 1, "code": "ta-ken"},
                                  409, TABLES)
        await self.assert_refused("PUT", "/api/redeem-codes/999", {"amount": 1}, 404, TABLES)

    async def test_admin_only(self) -> None:
        await self.admin()
        user = await self.register("plain")
        response = await self.call("GET", "/api/redeem-codes", token=user["token"])
        assert response.status == 403


class RedeemTests(RedeemCase):
    async def test_redeem_credits_once_with_ledger_row(self) -> None:
        code = await self.code(amount="5", max_uses=2)
        [(first_id, first), (second_id, second), (_, third)] = await self.make_users(3)
        formatted = "-".join(code["code"][i:i + 5] for i in range(0, 20, 5)).lower()
        response = await self.redeem(first, f" {formatted} ")
        assert response.status == 200, response
        body = response.json()
        assert body["amount"] == "5" and body["balance"] == "5"
        assert body["id"] == code["id"] and body["used_count"] == 1 and body["max_uses"] == 2
        assert (USERS, str(first_id).encode()) in self.announced  # wallet caches reload
        again = await self.redeem(first, code["code"])
        assert again.status == 400 and again.json()["error"] == "Redeem code already used"
        assert (await self.redeem(second, code["code"])).status == 200
        full = await self.redeem(third, code["code"])
        assert full.json()["error"] == "Redeem code has been fully used"
        for user_id in (first_id, second_id):
            assert await self.balance_is_ledger(user_id) == 5_000_000_000
            [row] = await self.table("ledger", user_id=user_id)
            assert row["kind"] == "redeem" and row["amount_nanos"] == 5_000_000_000
        assert (await self.table("redeem_codes"))[0]["used_count"] == 2

    async def test_refusals(self) -> None:
        [(user_id, token)] = await self.make_users(1)
        disabled = await self.code(enabled=False)
        expiring = await self.code(expires_at=(self.ctx.now() + timedelta(hours=1)).isoformat())
        cases = [("", "Redeem code is required"), ("NOPE", "Redeem code not found"),
                 (disabled["code"], "Redeem code is disabled")]
        for text, message in cases:
            response = await self.redeem(token, text)
            assert response.status == 400 and response.json()["error"] == message, response
        self.clock.advance(2 * 3600)
        expired = await self.redeem(token, expiring["code"])
        assert expired.json()["error"] == "Redeem code has expired"
        wrong_type = await self.call("POST", "/api/user/redeem-code", {"code": 5}, token=token)
        assert wrong_type.status == 400
        assert await self.table("ledger", user_id=user_id) == []
        assert await self.table("redeem_uses") == []

    async def test_unlimited_code(self) -> None:
        code = await self.code(amount="1", max_uses=0)
        users = await self.make_users(4)
        for _, token in users:
            assert (await self.redeem(token, code["code"])).status == 200
        assert (await self.table("redeem_codes"))[0]["used_count"] == 4

    async def test_group_grant_extends_never_shortens(self) -> None:
        group = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        long = await self.code(amount=0, group_id=group["id"], group_duration_days=30)
        short = await self.code(amount=0, group_id=group["id"], group_duration_days=5)
        stacked = await self.code(amount=0, group_id=group["id"], group_duration_days=10,
                                  allow_stacking=True)
        forever = await self.code(amount=0, group_id=group["id"], group_duration_days=0)
        later = await self.code(amount=0, group_id=group["id"], group_duration_days=400)
        [(user_id, token)] = await self.make_users(1)
        now = self.ctx.now()

        async def expiry() -> Any:
            [row] = await self.table("group_memberships", user_id=user_id, group_id=group["id"])
            return row["expires_at"]

        assert (await self.redeem(token, long["code"])).status == 200
        assert await expiry() == now + timedelta(days=30)
        assert (await self.redeem(token, short["code"])).status == 200
        assert await expiry() == now + timedelta(days=30)  # not shortened to 5 days
        assert (await self.redeem(token, stacked["code"])).status == 200
        assert await expiry() == now + timedelta(days=40)
        assert (await self.redeem(token, forever["code"])).status == 200
        assert await expiry() is None
        assert (await self.redeem(token, later["code"])).status == 200
        assert await expiry() is None  # permanent stays permanent
        assert await self.table("ledger", user_id=user_id) == []

    async def test_subscription_grant(self) -> None:
        plan = (await self.api("POST", "/api/subscription-plans", {
            "name": "pro", "reset_amount": "20", "reset_interval_days": 30,
            "duration_days": 90})).json()
        by_plan = await self.code(amount=0, subscription_plan_id=plan["id"])
        assert by_plan["subscription_duration_days"] == 90
        own = await self.code(amount="2", subscription_plan_id=plan["id"],
                              subscription_duration_days=10, allow_stacking=True)
        [(user_id, token)] = await self.make_users(1)
        now = self.ctx.now()
        assert (await self.redeem(token, by_plan["code"])).status == 200
        assert (await self.redeem(token, own["code"])).status == 200
        subs = await self.table("user_subscriptions", user_id=user_id)
        assert [s["balance_nanos"] for s in subs] == [20_000_000_000] * 2
        assert subs[0]["active_until"] == now + timedelta(days=90)
        assert subs[1]["active_until"] == now + timedelta(days=100)  # stacked on the first
        assert subs[0]["next_reset_at"] == now + timedelta(days=30)
        assert await self.balance_is_ledger(user_id) == 2_000_000_000
        in_use = await self.api("DELETE", f"/api/subscription-plans/{plan['id']}")
        assert in_use.status == 400 and in_use.json()["error"] == "Subscription plan is in use"

    async def test_guessing_is_throttled(self) -> None:
        [(_, token)] = await self.make_users(1)
        statuses = [(await self.redeem(token, f"GUESS{n}")).status for n in range(12)]
        assert statuses[:10] == [400] * 10 and statuses[10:] == [429, 429]
        limited = await self.redeem(token, "GUESS99")
        assert limited.header("Retry-After") is not None
        self.clock.advance(61)
        assert (await self.redeem(token, "GUESS100")).status == 400

    async def test_hundred_users_race_for_one_use(self) -> None:
        await self.race()

    async def race(self) -> None:
        code = await self.code(amount="3", max_uses=1)
        users = await self.make_users(100)
        responses = await gatherResults([
            ensureDeferred(self.redeem(token, code["code"])) for _, token in users])
        statuses = sorted(r.status for r in responses)
        assert statuses == [200] + [400] * 99, statuses
        assert {r.json()["error"] for r in responses if r.status == 400} == {
            "Redeem code has been fully used"}
        assert (await self.table("redeem_codes"))[0]["used_count"] == 1
        assert len(await self.table("redeem_uses")) == 1
        ledger = [r for r in await self.table("ledger") if r["kind"] == "redeem"]
        assert len(ledger) == 1
        assert await self.balance_is_ledger(ledger[0]["user_id"]) == 3_000_000_000


class PostgresRedeemTests(RedeemCase):
    backend = "postgresql"

    async def test_hundred_users_race_for_one_use(self) -> None:
        await RedeemTests.race(self)  # type: ignore[arg-type]

    async def test_same_user_concurrently_redeems_once(self) -> None:
        code = await self.code(amount="1", max_uses=0)
        [(user_id, token)] = await self.make_users(1)
        responses = await gatherResults([
            ensureDeferred(self.redeem(token, code["code"])) for _ in range(8)])
        assert sorted(r.status for r in responses) == [200] + [400] * 7
        assert await self.balance_is_ledger(user_id) == 1_000_000_000
