"""Channel-model configs: ``/api/channels/:id/models`` and ``/api/channel-models/:id``."""

from __future__ import annotations

from tests.console.admin_case import AdminCase

TABLES = ("channel_models", "models", "channel_model_group_multipliers")


class ChannelModelTests(AdminCase):
    async def channel(self, name: str = "up-a") -> int:
        response = await self.api("POST", "/api/channels", {
            "name": name, "type": "compat", "base_url": "https://api.example.com"})
        assert response.status == 200, response
        return response.json()["id"]

    async def model(self, name: str, **fields: object) -> dict:
        response = await self.api("POST", "/api/models", {"model_name": name, **fields})
        assert response.status == 200, response
        return response.json()

    async def test_create_by_name_creates_missing_model_in_same_write(self) -> None:
        cid = await self.channel()
        response = await self.api("POST", f"/api/channels/{cid}/models",
                                  {"model_name": "fast-small", "provider": "openai"})
        assert response.status == 200, response
        config = response.json()
        assert config["upstream_model_name"] == "fast-small"
        assert config["model_name"] == "fast-small" and config["model"]["enabled"] is True
        assert config["provider"] == "openai"
        assert config["input_price"] is None and config["output_price"] is None
        assert config["enabled"] is True and config["group_multipliers"] == []
        listed = await self.api("GET", f"/api/channels/{cid}/models")
        assert [c["id"] for c in listed.json()] == [config["id"]]

    async def test_existing_model_is_never_mutated(self) -> None:
        cid = await self.channel()
        model = await self.model("big", enabled=False, provider="anthropic",
                                 provider_icon_url="https://icons.example/a.png")
        before = await self.rows("models")
        by_name = await self.api("POST", f"/api/channels/{cid}/models", {
            "model_name": "big", "provider": "openai", "provider_icon_url": "", "enabled": True,
            "upstream_model_name": "big-2026"})
        assert by_name.status == 200, by_name
        by_id = await self.api("POST", f"/api/channels/{cid}/models", {
            "model_id": model["id"], "upstream_model_name": "big-alt", "enabled": False})
        assert by_id.status == 200 and by_id.json()["enabled"] is False
        assert await self.rows("models") == before
        await self.assert_refused("POST", f"/api/channels/{cid}/models", {
            "model_id": model["id"], "model_name": "renamed"}, 400, TABLES, field="model_name")

    async def test_price_overrides_nullable(self) -> None:
        cid = await self.channel()
        created = (await self.api("POST", f"/api/channels/{cid}/models", {
            "model_name": "m", "input_price": "0.5", "output_price": 2,
            "cached_input_price": 0})).json()
        assert created["input_price"] == "0.5" and created["output_price"] == "2"
        assert created["cached_input_price"] == "0" and created["image_input_price"] is None
        path = f"/api/channel-models/{created['id']}"
        updated = (await self.api("PUT", path, {"input_price": None, "image_output_price": "3",
                                                "upstream_model_name": "m-up"})).json()
        assert updated["input_price"] is None and updated["output_price"] == "2"
        assert updated["image_output_price"] == "3" and updated["upstream_model_name"] == "m-up"
        # origin rule: an update without upstream_model_name resets it to the model name
        reset = (await self.api("PUT", path, {"enabled": False})).json()
        assert reset["upstream_model_name"] == "m" and reset["enabled"] is False
        assert reset["output_price"] == "2"

    async def test_bad_inputs_change_nothing(self) -> None:
        cid = await self.channel()
        other = await self.model("other")
        config = (await self.api("POST", f"/api/channels/{cid}/models",
                                 {"model_name": "m"})).json()
        path = f"/api/channel-models/{config['id']}"
        cases = [
            ("POST", f"/api/channels/{cid}/models", {}, 400, "model_id"),
            ("POST", f"/api/channels/{cid}/models", {"model_id": 999}, 400, "model_id"),
            ("POST", f"/api/channels/{cid}/models", {"model_name": "m"}, 409,
             "upstream_model_name"),
            ("POST", f"/api/channels/{cid}/models", {"model_name": "n", "input_price": -1}, 400,
             "input_price"),
            ("POST", f"/api/channels/{cid}/models", {"model_name": "n", "output_price": "x"}, 400,
             "output_price"),
            ("POST", f"/api/channels/{cid}/models", {"model_name": "n", "enabled": 1}, 400,
             "enabled"),
            ("POST", "/api/channels/999/models", {"model_name": "n"}, 404, None),
            ("PUT", path, {"model_name": "ghost"}, 400, "model_name"),
            ("PUT", path, {"model_id": 999}, 400, "model_id"),
            ("PUT", path, {"cached_input_price": "-0.1"}, 400, "cached_input_price"),
            ("PUT", "/api/channel-models/999", {"enabled": True}, 404, None),
        ]
        for method, target, payload, status, field in cases:
            await self.assert_refused(method, target, payload, status, TABLES, field=field)
        moved = await self.api("PUT", path, {"model_id": other["id"]})
        assert moved.json()["model_name"] == "other"
        assert moved.json()["upstream_model_name"] == "other"
        await self.api("POST", f"/api/channels/{cid}/models", {"model_name": "m"})
        await self.assert_refused("PUT", path, {"model_name": "m"}, 409, TABLES)

    async def test_group_multipliers_and_delete(self) -> None:
        cid = await self.channel()
        vip = (await self.api("POST", "/api/groups", {"name": "vip"})).json()
        config = (await self.api("POST", f"/api/channels/{cid}/models",
                                 {"model_name": "m"})).json()
        path = f"/api/channel-models/{config['id']}/group-multipliers"
        response = await self.api("PUT", path, [{"group_id": vip["id"], "multiplier": "0.9"}])
        assert response.status == 200, response
        assert [(m["channel_model_id"], m["group"]["name"], m["multiplier"])
                for m in response.json()] == [(config["id"], "vip", "0.9")]
        shown = (await self.api("GET", f"/api/channel-models/{config['id']}")).json()
        assert shown["group_multipliers"][0]["multiplier"] == "0.9"
        await self.assert_refused("PUT", path, [{"group_id": 999, "multiplier": 1}], 400, TABLES,
                                  field="group_id")
        await self.assert_refused("PUT", "/api/channel-models/999/group-multipliers", [], 404,
                                  TABLES)
        deleted = await self.api("DELETE", f"/api/channel-models/{config['id']}")
        assert deleted.json() == {"message": "Model config deleted"}
        assert await self.rows("channel_model_group_multipliers") == []
        assert [m["model_name"] for m in await self.rows("models")] == ["m"]
        assert (await self.api("DELETE", f"/api/channel-models/{config['id']}")).status == 404

    async def test_permissions(self) -> None:
        await self.admin()
        user = await self.register("mallory")
        for method, path in (("PUT", "/api/channel-models/1"), ("DELETE", "/api/channel-models/1"),
                             ("PUT", "/api/channel-models/1/group-multipliers")):
            assert (await self.call(method, path, [])).status == 401
            assert (await self.call(method, path, [], token=user["token"])).status == 403
