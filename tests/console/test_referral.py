"""``GET /api/user/referral``: code, link, invitees (id + username only) and commissions."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import update

from gateway.store import schema
from gateway.store.billing_writes import write_batch
from tests.support.app import AppTestCase


class ReferralTests(AppTestCase):
    async def enable(self, rate: str = "10") -> None:
        await self.ctx.live_settings.save({"referral_enabled": "true",
                                           "referral_commission_rate": rate,
                                           "base_url": "https://console.example.org/"},
                                          self.ctx.now())

    async def invite(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        await self.setup_admin()
        await self.enable()
        inviter = await self.register("ann")
        code = inviter["user"]["referral_code"]
        invitees = []
        for name in ("kim", "lee"):
            response = await self.call("POST", "/auth/password/register", {
                "username": name, "email": f"{name}@example.com", "password": "password123",
                "referral_code": code.lower()})
            assert response.status == 200, response
            invitees.append(response.json())
        return inviter, invitees

    async def test_view_shows_invitees_as_id_and_username_only(self) -> None:
        inviter, invitees = await self.invite()
        response = await self.call("GET", "/api/user/referral", token=inviter["token"])
        assert response.status == 200, response
        view = response.json()
        code = inviter["user"]["referral_code"]
        assert view["enabled"] is True and view["code"] == code
        assert view["link"] == f"https://console.example.org/?ref={code}"
        assert view["commission_rate"] == "0.1"
        assert view["invite_count"] == 2 and view["total_commission"] == "0"
        assert sorted(view["invitees"], key=lambda i: i["id"]) == [
            {"id": i["user"]["id"], "username": i["user"]["username"]} for i in invitees]
        raw = response.body.decode()
        assert "kim@example.com" not in raw and "balance" not in raw

    async def test_commission_from_billed_spend_appears(self) -> None:
        inviter, invitees = await self.invite()
        kim = invitees[0]["user"]

        def fund_and_settle(conn: Any) -> list[dict[str, Any]]:
            conn.execute(update(schema.users).where(schema.users.c.id == kim["id"])
                         .values(balance_nanos=10_000_000_000))
            conn.execute(schema.ledger.insert().values(
                user_id=kim["id"], kind="admin_adjust", amount_nanos=10_000_000_000,
                balance_after_nanos=10_000_000_000, created_at=self.ctx.now()))
            return write_batch(conn, [{
                "request_id": "req-1", "user_id": kim["id"], "api_key_id": None,
                "cost_nanos": 2_500_000_000, "delivered": True, "model_name": "m"}],
                self.ctx.now())

        await self.ctx.db.transaction(fund_and_settle)
        view = (await self.call("GET", "/api/user/referral", token=inviter["token"])).json()
        assert view["total_commission"] == "0.25"
        [log] = view["recent_logs"]
        assert log["referred_user"] == {"id": kim["id"], "username": "kim"}
        assert log["base_cost"] == "2.5" and log["rate"] == "0.1" and log["amount"] == "0.25"
        assert isinstance(log["token_log_id"], int)
        assert set(orjson.loads(orjson.dumps(log["referred_user"]))) == {"id", "username"}
        me = (await self.call("GET", "/api/user/me", token=inviter["token"])).json()
        assert me["balance"] == "0.25"
        kim_view = (await self.call("GET", "/api/user/referral",
                                    token=invitees[0]["token"])).json()
        assert kim_view["invite_count"] == 0 and kim_view["recent_logs"] == []

    async def test_link_falls_back_to_request_host(self) -> None:
        await self.setup_admin()
        user = await self.register("solo")
        view = (await self.call("GET", "/api/user/referral", token=user["token"])).json()
        assert view["enabled"] is False and view["commission_rate"] == "0"
        assert view["link"].startswith("http://127.0.0.1:")
        assert view["link"].endswith(f"/?ref={user['user']['referral_code']}")
        assert (await self.call("GET", "/api/user/referral")).status == 401
