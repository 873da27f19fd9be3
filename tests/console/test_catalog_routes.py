"""User catalog, public models and pricing: shapes, visibility, precedence, live price changes."""

from __future__ import annotations

from typing import Any

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder, nanos

VIDEO = {"resolutions": [{"resolution": "720p", "duration_unit_price": "0.12"}]}


class CatalogRouteTests(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.build = CatalogBuilder(self.ctx)

    async def world(self) -> dict[str, Any]:
        """Two open user channels (x1, x1.5), one restricted; three models."""
        admin = await self.setup_admin()
        user = await self.register("carol")
        ids: dict[str, Any] = {"admin": admin, "token": user["token"], "user": user["user"]}
        ids["std"] = await self.build.user_channel("standard", "1")
        ids["pro"] = await self.build.user_channel("pro", "1.5", description="fast lane")
        ids["vip"] = await self.build.user_channel("vip", "0.5")
        ids["vip_group"] = await self.build.group("vip-group")
        await self.build.grant(ids["vip"], group_id=ids["vip_group"])
        std_up = await self.build.channel(ids["std"], "std-up")
        pro_up = await self.build.channel(ids["pro"], "pro-up")
        vip_up = await self.build.channel(ids["vip"], "vip-up")
        ids["std_up"] = std_up
        ids["small"] = await self.build.model("fast-small", input="0.3", output="1.2",
                                              cached_input="0.03", icon="https://i/s.svg")
        ids["video"] = await self.build.model("vid-gen-1", quota_type=100, video=VIDEO)
        ids["img"] = await self.build.model("img-1", quota_type=1, output="0.04")
        ids["small_std"] = await self.build.config(std_up, ids["small"])
        await self.build.config(pro_up, ids["small"], input_price="0.2")
        await self.build.config(vip_up, ids["small"])
        await self.build.config(pro_up, ids["video"])
        await self.build.config(std_up, ids["img"])
        await self.build.announce()
        return ids

    async def test_user_catalog_shape_visibility_and_lowest_prices(self):
        ids = await self.world()
        response = await self.call("GET", "/api/user/catalog", token=ids["token"])
        assert response.status == 200, response
        body = response.json()
        assert [c["name"] for c in body["channels"]] == ["pro", "standard"]
        pro = body["channels"][0]
        assert pro == {
            "id": ids["pro"], "name": "pro", "description": "fast lane", "multiplier": "1.5",
            "enabled": True, "models": ["fast-small", "vid-gen-1"], "model_icons": {
                "fast-small": "https://i/s.svg"},
            "video_billing_configs": {"vid-gen-1": {"resolutions": [
                {"resolution": "720p", "duration_unit_price": "0.18"}]}}}
        assert body["models"] == ["fast-small", "img-1", "vid-gen-1"]
        # input: standard 0.3 x1 vs pro override 0.2 x1.5 = 0.3; output: 1.2 vs 1.8
        assert body["prices"]["fast-small"] == {
            "input_price": "0.3", "output_price": "1.2", "cached_input_price": "0.03",
            "image_input_price": "0", "image_output_price": "0"}
        assert body["prices"]["img-1"]["output_price"] == "0.04"
        assert body["quota_type"] == {"fast-small": 0, "img-1": 1, "vid-gen-1": 100}
        assert body["video_billing_configs"]["vid-gen-1"]["resolutions"][0][
            "duration_unit_price"] == "0.18"
        assert (await self.call("GET", "/api/user/catalog")).status == 401

    async def test_group_membership_opens_channels_and_applies_multipliers(self):
        ids = await self.world()
        await self.build.membership(ids["user"]["id"], ids["vip_group"])
        await self.build.set(schema.groups, ids["vip_group"], multiplier_nanos=nanos("0.8"))
        body = (await self.call("GET", "/api/user/catalog", token=ids["token"])).json()
        assert [c["name"] for c in body["channels"]] == ["pro", "standard", "vip"]
        # vip: 0.3 x 0.5 uc x 0.8 group = 0.12
        assert body["prices"]["fast-small"]["input_price"] == "0.12"
        # a config group override for this group beats the group multiplier
        await self.build.config_multiplier(ids["small_std"], ids["vip_group"], "0.1")
        await self.build.announce()
        body = (await self.call("GET", "/api/user/catalog", token=ids["token"])).json()
        assert body["prices"]["fast-small"]["input_price"] == "0.03"

    async def test_price_change_and_announce_show_at_once(self):
        ids = await self.world()
        await self.build.set(schema.models, ids["small"], output_price_nanos=nanos("0.9"))
        body = (await self.call("GET", "/api/user/catalog", token=ids["token"])).json()
        assert body["prices"]["fast-small"]["output_price"] == "0.9"
        snap = self.ctx.catalog.snapshot
        prices = snap.candidates("fast-small")[0].prices_for([])
        assert str(prices.base["output_price"]) == "0.9"
        await self.build.set(schema.channels, ids["std_up"], enabled=False)
        body = (await self.call("GET", "/api/user/catalog", token=ids["token"])).json()
        assert "img-1" not in body["models"]
        assert body["prices"]["fast-small"]["output_price"] == "1.35"  # pro only: 0.9 x 1.5

    async def test_public_models(self):
        ids = await self.world()
        response = await self.call("GET", "/api/public/models")
        assert response.status == 200, response
        items = response.json()
        assert [i["model_name"] for i in items] == ["fast-small", "img-1", "vid-gen-1"]
        small = items[0]
        assert small["input_price"] == "0.3" and small["is_meta_model"] is False
        assert small["provider"] == "custom" and small["provider_name"] == "Custom"
        assert small["input_price_tiers"] == [] and small["quota_type"] == 0
        assert [c["name"] for c in small["user_channels"]] == ["pro", "standard", "vip"]
        pro = small["user_channels"][0]
        assert pro["input_price"] == "0.2" and pro["effective_input_price"] == "0.3"
        assert pro["output_price"] == "1.2" and pro["effective_output_price"] == "1.8"
        assert pro["multiplier"] == "1.5" and pro["id"] == ids["pro"]
        video = items[2]["user_channels"][0]
        assert video["effective_video_billing_config"]["resolutions"][0][
            "duration_unit_price"] == "0.18"
        await self.build.set(schema.models, ids["img"], enabled=False)
        items = (await self.call("GET", "/api/public/models")).json()
        assert [i["model_name"] for i in items] == ["fast-small", "vid-gen-1"]

    async def enable_pricing(self, admin: str) -> None:
        response = await self.call("PUT", "/api/settings", {"pricing_endpoint_enabled": True},
                                   token=admin)
        assert response.status == 200, response

    async def test_pricing_is_off_by_default(self):
        await self.world()
        response = await self.call("GET", "/api/pricing")
        assert response.status == 404 and response.json()["error"] == "Not found"

    async def test_pricing_exposure_and_filters(self):
        ids = await self.world()
        await self.build.set(schema.models, ids["small"], input_price_tiers=[
            {"min_tokens": 0, "price": "0.3"}, {"min_tokens": 200000, "price": "0.6"}])
        await self.enable_pricing(ids["admin"])
        response = await self.call("GET", "/api/pricing")
        assert response.status == 200, response
        body = response.json()
        assert body["success"] is True and body["message"] == ""
        data = body["data"]
        assert data["unit"] == "per_1m_tokens"
        # lowest effective input: vip 0.3 x 0.5 = 0.15, halved for token pricing
        assert data["input_price"]["fast-small"] == "0.075"
        assert data["model_ratio"]["fast-small"] == "0.075"
        assert data["output_price"]["fast-small"] == "0.3"  # vip 1.2 x 0.5 / 2
        assert data["completion_ratio"]["fast-small"] == "4"
        assert data["cache_read_input_price"] == data["cached_input_price"]
        assert data["input_price_tiers"]["fast-small"] == [
            {"min_tokens": 0, "price": "0.075"}, {"min_tokens": 200000, "price": "0.15"}]
        assert data["base_input_price"]["fast-small"] == "0.15"
        assert data["base_input_price_tiers"]["fast-small"][1]["price"] == "0.3"
        # per-request and video models are not halved
        assert data["output_price"]["img-1"] == "0.04"
        assert data["completion_ratio"]["img-1"] == "0.04"
        assert data["quota_type"] == {"fast-small": 0, "img-1": 1, "vid-gen-1": 100}
        assert data["base_quota_type"] == data["quota_type"]
        assert data["video_billing_config"]["vid-gen-1"]["resolutions"][0][
            "duration_unit_price"] == "0.18"
        pro = data["user_channel_prices"]["pro"]
        assert pro["id"] == ids["pro"] and pro["multiplier"] == "1.5"
        assert pro["input_price"]["fast-small"] == "0.15"  # override 0.2 x 1.5 / 2
        assert set(data["user_channel_prices"]) == {"pro", "standard", "vip"}
        only = (await self.call("GET", f"/api/pricing?user_channel_id={ids['pro']}")).json()
        assert set(only["data"]["user_channel_prices"]) == {"pro"}
        assert only["data"]["input_price"] == {"fast-small": "0.15", "vid-gen-1": "0"}
        bad = await self.call("GET", "/api/pricing?user_channel_id=abc")
        assert bad.status == 400 and bad.json()["error"] == "Invalid user_channel_id"


class CatalogRoutePostgresTests(CatalogRouteTests):
    backend = "postgresql"
