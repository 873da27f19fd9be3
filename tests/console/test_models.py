"""``/api/models``: global models, prices, tiers, video billing, full-replace PUT, cascade."""

from __future__ import annotations

from gateway.invalidation import CATALOG
from gateway.store.schema import PRICE_NAMES
from tests.console.admin_case import AdminCase

TABLES = ("models", "channel_models")
VIDEO = {"resolutions": [
    {"resolution": "720P", "duration_unit_price": "0.12"},
    {"resolution": "1280*720", "durations": [{"seconds": 10, "price": "1.1"},
                                             {"seconds": 5, "price": 0.6}]}]}


class ModelTests(AdminCase):
    async def create(self, **fields: object) -> dict:
        response = await self.api("POST", "/api/models", {"model_name": "fast-small", **fields})
        assert response.status == 200, response
        return response.json()

    async def test_create_full_record(self) -> None:
        model = await self.create(
            display_name="Fast Small", provider="OpenAI",
            provider_icon_url="https://icons.example/openai.svg",
            input_price="0.30", output_price=1.2, cached_input_price="0.03",
            cache_write_input_price="0.375", cache_write_1h_input_price="0.6",
            image_input_price=0, image_output_price="40", audio_input_price="3",
            audio_output_price="12",
            input_price_tiers=[{"min_tokens": 200000, "price": "0.6"},
                               {"min_tokens": 0, "price": 0.3}],
            output_price_tiers=[{"min_tokens": 128000, "price": 2.4,
                                 "condition": "prompt_tokens"}],
        )
        assert model["display_name"] == "Fast Small"
        assert model["provider"] == "openai" and model["provider_name"] == "OpenAI"
        assert model["provider_icon_url"] == "https://icons.example/openai.svg"
        assert model["quota_type"] == 0 and model["enabled"] is True
        assert [model[n] for n in PRICE_NAMES] == [
            "0.3", "1.2", "0.03", "0.375", "0.6", "0", "40", "3", "12"]
        assert model["input_price_tiers"] == [
            {"min_tokens": 0, "price": "0.3", "condition": ""},
            {"min_tokens": 200000, "price": "0.6", "condition": ""}]
        assert model["output_price_tiers"] == [
            {"min_tokens": 128000, "price": "2.4", "condition": "full_input_tokens"}]
        assert model["cached_input_price_tiers"] == []
        assert model["video_billing_config"] == {"resolutions": []}
        stored = (await self.rows("models"))[0]
        assert stored["input_price_nanos"] == 300_000_000
        assert stored["output_price_tiers"][0]["price"] == "2.4"
        assert (CATALOG, b"*") in self.announced
        listed = await self.api("GET", "/api/models")
        assert listed.json() == [model]

    async def test_explicit_false_and_video_billing(self) -> None:
        model = await self.create(enabled=False, quota_type=100, video_billing_config=VIDEO)
        assert model["enabled"] is False and model["quota_type"] == 100
        assert model["video_billing_config"] == {"resolutions": [
            {"resolution": "1280x720", "duration_unit_price": "0",
             "durations": [{"seconds": 5, "price": "0.6"}, {"seconds": 10, "price": "1.1"}]},
            {"resolution": "720p", "duration_unit_price": "0.12", "durations": []}]}
        per_item = await self.create(model_name="img", quota_type=1, output_price="0.04")
        assert per_item["quota_type"] == 1

    async def test_put_replaces_price_form_and_merges_the_rest(self) -> None:
        model = await self.create(display_name="D", provider="anthropic",
                                  provider_icon_url="https://i.example/a.png", enabled=False,
                                  input_price="1", output_price="2",
                                  input_price_tiers=[{"min_tokens": 0, "price": "1"}])
        response = await self.api("PUT", f"/api/models/{model['id']}", {"output_price": "5"})
        assert response.status == 200, response
        body = response.json()
        assert body["input_price"] == "0" and body["output_price"] == "5"
        assert body["input_price_tiers"] == []
        assert body["model_name"] == "fast-small" and body["display_name"] == "D"
        assert body["provider"] == "anthropic" and body["enabled"] is False
        assert body["provider_icon_url"] == "https://i.example/a.png"
        # an explicit provider without an icon clears the icon (origin rule)
        moved = (await self.api("PUT", f"/api/models/{model['id']}",
                                {"provider": "google", "model_name": "renamed",
                                 "enabled": True})).json()
        assert moved["provider"] == "google" and moved["provider_icon_url"] == ""
        assert moved["model_name"] == "renamed" and moved["enabled"] is True

    async def test_bad_inputs_change_nothing(self) -> None:
        model = await self.create()
        await self.create(model_name="taken")
        path = f"/api/models/{model['id']}"
        cases = [
            ("POST", "/api/models", {}, 400, "model_name"),
            ("POST", "/api/models", {"model_name": " "}, 400, "model_name"),
            ("POST", "/api/models", {"model_name": "x" * 101}, 400, "model_name"),
            ("POST", "/api/models", {"model_name": "fast-small"}, 409, "model_name"),
            ("POST", "/api/models", {"model_name": "n", "quota_type": 2}, 400, "quota_type"),
            ("POST", "/api/models", {"model_name": "n", "quota_type": "abc"}, 400, "quota_type"),
            ("POST", "/api/models", {"model_name": "n", "input_price": "-1"}, 400, "input_price"),
            ("POST", "/api/models", {"model_name": "n", "audio_output_price": "1e13"}, 400,
             "audio_output_price"),
            ("POST", "/api/models", {"model_name": "n", "output_price_tiers": "cheap"}, 400,
             "output_price_tiers"),
            ("POST", "/api/models", {"model_name": "n", "input_price_tiers": [{"min_tokens": 1}]},
             400, "input_price_tiers"),
            ("POST", "/api/models", {"model_name": "n", "quota_type": 100}, 400,
             "video_billing_config"),
            ("POST", "/api/models", {"model_name": "n", "quota_type": 100,
                                     "video_billing_config": {"resolutions": [
                                         {"resolution": "720p", "duration_unit_price": "0"}]}},
             400, "video_billing_config"),
            ("POST", "/api/models", {"model_name": "n", "video_billing_config": [1]}, 400,
             "video_billing_config"),
            ("POST", "/api/models", {"model_name": "n", "enabled": "true"}, 400, "enabled"),
            ("PUT", path, {"model_name": "taken"}, 409, "model_name"),
            ("PUT", path, {"quota_type": 100}, 400, "video_billing_config"),
            ("PUT", "/api/models/999", {"input_price": 1}, 404, None),
        ]
        for method, target, payload, status, field in cases:
            await self.assert_refused(method, target, payload, status, TABLES, field=field)
        response = await self.api("POST", "/api/models", {"model_name": "n", "quota_type": 100})
        assert response.json()["error"] == "Video billing requires at least one resolution price"

    async def test_delete_cascades_configs(self) -> None:
        model = await self.create()
        channel = (await self.api("POST", "/api/channels", {
            "name": "up", "type": "compat", "base_url": "https://api.example.com"})).json()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        config = (await self.api("POST", f"/api/channels/{channel['id']}/models",
                                 {"model_id": model["id"]})).json()
        await self.api("PUT", f"/api/channel-models/{config['id']}/group-multipliers",
                       [{"group_id": vip["id"], "multiplier": "2"}])
        deleted = await self.api("DELETE", f"/api/models/{model['id']}")
        assert deleted.json() == {"message": "Model deleted"}
        assert await self.rows("channel_models") == []
        assert await self.rows("channel_model_group_multipliers") == []
        assert len(await self.rows("channels")) == 1
        assert (await self.api("DELETE", f"/api/models/{model['id']}")).status == 404

    async def test_sync_paths_are_admin_routes(self) -> None:
        # the sync routes live on this mount now (tests in test_model_sync.py)
        response = await self.call("POST", "/api/models/sync", {})
        assert response.status == 401

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        for method, path in (("GET", "/api/models"), ("POST", "/api/models"),
                             ("PUT", "/api/models/1"), ("DELETE", "/api/models/1")):
            assert (await self.call(method, path, {"model_name": "x"})).status == 401
            assert (await self.call(method, path, {"model_name": "x"},
                                    token=user["token"])).status == 403
        assert await self.rows("models") == []


class ModelOnPostgresTests(ModelTests):
    backend = "postgresql"
