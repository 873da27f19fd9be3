"""``/api/subscription-plans``: CRUD, input aliases, validation and in-use protection."""

from __future__ import annotations

from typing import Any

from tests.console.admin_case import AdminCase

TABLES = ("subscription_plans",)
PLAN = {"name": "pro", "reset_amount": "20", "reset_interval_days": 30}


class SubscriptionPlanTests(AdminCase):
    async def test_create_list_update_delete(self) -> None:
        created = await self.api("POST", "/api/subscription-plans", {
            **PLAN, "price": 9.9, "duration_days": 90, "purchasable": True,
            "description": "monthly quota"})
        assert created.status == 200, created
        plan = created.json()
        assert plan["reset_amount"] == "20" and plan["amount"] == "20"
        assert plan["price"] == "9.9" and plan["duration_days"] == 90
        assert plan["active_days"] == 90 and plan["purchasable"] is True
        assert plan["enabled"] is True and plan["description"] == "monthly quota"
        aliased = (await self.api("POST", "/api/subscription-plans", {
            "name": "lite", "amount": 5, "reset_interval_days": 7, "active_days": 14,
            "enabled": False})).json()
        assert aliased["reset_amount"] == "5" and aliased["duration_days"] == 14
        assert aliased["enabled"] is False and aliased["purchasable"] is False
        listed = (await self.api("GET", "/api/subscription-plans")).json()
        assert [p["name"] for p in listed] == ["lite", "pro"]
        updated = await self.api("PUT", f"/api/subscription-plans/{plan['id']}", {
            "name": "pro", "reset_amount": "25", "reset_interval_days": 30})
        assert updated.status == 200, updated
        body = updated.json()
        # full replace, except enabled which keeps its value when absent
        assert body["reset_amount"] == "25" and body["price"] == "0"
        assert body["purchasable"] is False and body["enabled"] is True
        shown = (await self.api("GET", f"/api/subscription-plans/{aliased['id']}")).json()
        assert shown["enabled"] is False
        deleted = await self.api("DELETE", f"/api/subscription-plans/{plan['id']}")
        assert deleted.json() == {"message": "Subscription plan deleted"}
        assert (await self.api("GET", f"/api/subscription-plans/{plan['id']}")).status == 404

    async def test_bad_inputs_change_nothing(self) -> None:
        existing = (await self.api("POST", "/api/subscription-plans", PLAN)).json()
        cases: list[tuple[dict[str, Any], str, str | None]] = [
            ({**PLAN, "name": ""}, "name", "Plan name is required"),
            ({**PLAN, "name": 3}, "name", None),
            ({**PLAN, "reset_amount": 0}, "reset_amount",
             "Reset amount must be greater than zero"),
            ({"name": "x", "reset_interval_days": 1}, "amount", None),
            ({**PLAN, "name": "x", "reset_interval_days": 0}, "reset_interval_days",
             "Reset interval must be greater than zero"),
            ({**PLAN, "name": "x", "price": -1}, "price", "Price must not be negative"),
            ({**PLAN, "name": "x", "duration_days": -1}, "duration_days",
             "Duration must not be negative"),
            ({**PLAN, "name": "x", "purchasable": True}, "purchasable",
             "Purchasable plans require a price greater than zero"),
            ({**PLAN, "name": "x", "enabled": "no"}, "enabled", None),
        ]
        for payload, field, message in cases:
            await self.assert_refused("POST", "/api/subscription-plans", payload, 400, TABLES,
                                      field=field, message=message)
        await self.assert_refused("POST", "/api/subscription-plans", PLAN, 409, TABLES)
        await self.assert_refused("PUT", f"/api/subscription-plans/{existing['id']}",
                                  {**PLAN, "reset_amount": -5}, 400, TABLES)
        await self.assert_refused("PUT", "/api/subscription-plans/999", PLAN, 404, TABLES)

    async def test_plan_used_by_a_code_cannot_be_deleted(self) -> None:
        plan = (await self.api("POST", "/api/subscription-plans", PLAN)).json()
        code = await self.api("POST", "/api/redeem-codes", {"subscription_plan_id": plan["id"]})
        assert code.status == 200, code
        refused = await self.api("DELETE", f"/api/subscription-plans/{plan['id']}")
        assert refused.status == 400
        assert refused.json()["error"] == "Subscription plan is used by redeem codes"

    async def test_admin_only(self) -> None:
        await self.admin()
        user = await self.register("plain")
        for method in ("GET", "POST"):
            response = await self.call(method, "/api/subscription-plans", PLAN,
                                       token=user["token"])
            assert response.status == 403
