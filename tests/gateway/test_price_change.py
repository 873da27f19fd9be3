"""A price changed through the admin console is what the very next call is billed at, and what
the user's catalog shows, on this node at once (no restart, no delay)."""

from __future__ import annotations

from decimal import Decimal

from tests.gateway.gateway_case import GatewayTestCase


class PriceChangeTests(GatewayTestCase):
    async def test_console_price_change_applies_at_once(self) -> None:
        await self.provision()
        catalog = (await self.call("GET", "/api/user/catalog", token=self.user_token)).json()
        assert Decimal(catalog["prices"]["gpt-fake"]["input_price"]) == Decimal(1000)

        changed = await self.call("PUT", f"/api/models/{self.model_id}", {
            "model_name": "gpt-fake", "input_price": "10", "output_price": "20"},
            token=self.admin_token)
        assert changed.status == 200, changed

        catalog = (await self.call("GET", "/api/user/catalog", token=self.user_token)).json()
        assert Decimal(catalog["prices"]["gpt-fake"]["input_price"]) == Decimal(10)
        assert Decimal(catalog["prices"]["gpt-fake"]["output_price"]) == Decimal(20)

        reply = await self.call("POST", "/v1/chat/completions", {
            "model": "gpt-fake", "messages": [{"role": "user", "content": "one two"}]},
            headers={"Authorization": f"Bearer {self.api_key}"})
        assert reply.status == 200
        usage = reply.json()["usage"]
        rows = await self.usage_rows()
        expected = (Decimal(usage["prompt_tokens"]) * 10
                    + Decimal(usage["completion_tokens"]) * 20) / Decimal(1_000_000)
        assert Decimal(rows[-1]["cost_nanos"]) / Decimal(10**9) == expected

    async def test_group_multiplier_change_applies_at_once(self) -> None:
        await self.provision()
        groups = (await self.call("GET", "/api/groups", token=self.admin_token)).json()
        default = next(g for g in groups if g["is_default"])
        result = await self.call("PUT", f"/api/groups/{default['id']}", {"multiplier": "0.5"},
                                 token=self.admin_token)
        assert result.status == 200, result
        catalog = (await self.call("GET", "/api/user/catalog", token=self.user_token)).json()
        assert Decimal(catalog["prices"]["gpt-fake"]["input_price"]) == Decimal(500)
