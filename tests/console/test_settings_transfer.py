"""``POST /api/settings/export`` and ``/import``: sections, secrets, round trip, all-or-nothing."""

from __future__ import annotations

import copy
from typing import Any

import orjson
from sqlalchemy import delete

from gateway.invalidation import CATALOG
from gateway.store import schema
from gateway.store.settings_rows import read_settings
from tests.console.admin_case import AdminCase

CATALOG_TABLES = ("user_channels", "channels", "models", "channel_models")
ALL_TABLES = (*CATALOG_TABLES, "settings", "users", "groups")
VIDEO = {"resolutions": [{"resolution": "720P", "duration_unit_price": "0.12"}]}
VOLATILE = {"id", "created_at", "updated_at", "user_channel_id", "channel_id", "model_id"}


class TransferTest(AdminCase):
    async def build_config(self) -> None:
        settings = await self.api("PUT", "/api/settings", {
            "site_name": "Acme AI", "smtp_password": "smtp-SECRET", "log_retention_days": 45})
        assert settings.status == 200, settings
        uc = await self.api("POST", "/api/user-channels", {
            "name": "standard", "description": "main", "multiplier": "1.5",
            "routing_algorithm": "weighted", "enabled": False})
        assert uc.status == 200, uc
        channel = await self.api("POST", "/api/channels", {
            "name": "up-a", "type": "compat", "base_url": "https://up.example/v1",
            "api_key": "sk-upstream-SECRET", "user_channel_id": uc.json()["id"],
            "priority": 10, "weight": 3, "multiplier": "0.8", "price_sync_enabled": True,
            "price_sync_cron": "0 * * * *", "plugin_config": {"a": 1}})
        assert channel.status == 200, channel
        loose = await self.api("POST", "/api/channels", {
            "name": "loose", "type": "compat", "base_url": "https://loose.example"})
        assert loose.status == 200, loose
        model = await self.api("POST", "/api/models", {
            "model_name": "fast-small", "provider": "openai", "display_name": "Fast",
            "quota_type": 0, "input_price": "0.3", "output_price": "1.2",
            "input_price_tiers": [{"min_tokens": 200000, "price": "0.6"}]})
        assert model.status == 200, model
        video = await self.api("POST", "/api/models", {
            "model_name": "clip", "quota_type": 100, "video_billing_config": VIDEO,
            "enabled": False})
        assert video.status == 200, video
        config = await self.api("POST", f"/api/channels/{channel.json()['id']}/models", {
            "model_name": "fast-small", "upstream_model_name": "fast-small-2025",
            "input_price": "0.25", "enabled": False})
        assert config.status == 200, config

    async def export(self, payload: Any = None) -> dict[str, Any]:
        response = await self.api("POST", "/api/settings/export", payload)
        assert response.status == 200, response
        assert response.header("cache-control") == "no-store"
        disposition = response.header("content-disposition") or ""
        assert disposition.startswith('attachment; filename="'), disposition
        assert disposition.endswith('.json"')
        assert b"\n  " in response.body  # pretty-printed
        return response.json()

    async def catalog_state(self) -> dict[str, list[dict[str, Any]]]:
        """Catalog rows without ids/timestamps, with references resolved to names."""
        snap = await self.snapshot(*CATALOG_TABLES)
        ucs = {r["id"]: r["name"] for r in snap["user_channels"]}
        chans = {r["id"]: (r["name"], r["base_url"]) for r in snap["channels"]}
        models = {r["id"]: r["model_name"] for r in snap["models"]}
        state: dict[str, list[dict[str, Any]]] = {}
        for name, rows in snap.items():
            out = []
            for row in rows:
                item = {k: v for k, v in row.items() if k not in VOLATILE}
                if "user_channel_id" in row:
                    item["user_channel"] = ucs.get(row["user_channel_id"])
                if name == "channel_models":
                    item["channel"] = chans[row["channel_id"]]
                    item["model"] = models[row["model_id"]]
                out.append(item)
            state[name] = sorted(out, key=repr)
        return state

    async def wipe_catalog(self) -> None:
        def wipe(conn: Any) -> None:
            for table in ("channel_models", "channels", "user_channels", "models"):
                conn.execute(delete(schema.metadata.tables[table]))

        await self.ctx.db.transaction(wipe)

    async def test_export_all_sections_with_secrets(self) -> None:
        await self.build_config()
        doc = await self.export()
        assert doc["version"] == 1
        assert doc["exported_at"] == "2027-01-15T08:00:00Z"
        assert doc["sections"] == ["system_settings", "channels", "model_data", "model_prices"]
        settings = {s["key"]: s["value"] for s in doc["system_settings"]}
        assert settings["site_name"] == "Acme AI"
        assert settings["smtp_password"] == "smtp-SECRET"
        channel = next(c for c in doc["channels"] if c["name"] == "up-a")
        assert channel["api_key"] == "sk-upstream-SECRET"
        assert channel["user_channel_name"] == "standard"
        assert (channel["multiplier"], channel["priority"]) == ("0.8", 10)
        assert [m["model_name"] for m in doc["models"]] == ["clip", "fast-small"]
        price = next(p for p in doc["model_prices"] if p["model_name"] == "fast-small")
        assert (price["input_price"], price["output_price"]) == ("0.3", "1.2")
        assert price["input_price_tiers"][0]["min_tokens"] == 200000
        config = doc["model_configs"][0]
        assert (config["channel_name"], config["channel_base_url"], config["input_price"],
                config["output_price"]) == ("up-a", "https://up.example/v1", "0.25", None)
        for forbidden in ("users", "api_keys", "orders", "usage_logs", "groups"):
            assert forbidden not in doc

    async def test_export_selected_sections_and_bad_sections(self) -> None:
        await self.build_config()
        doc = await self.export({"sections": ["MODEL_DATA"]})
        assert doc["sections"] == ["model_data"]
        assert set(doc) == {"version", "exported_at", "sections", "models"}
        assert (await self.export({}))["sections"][0] == "system_settings"
        assert (await self.export({"sections": []}))["sections"][-1] == "model_prices"
        bad = await self.api("POST", "/api/settings/export", {"sections": ["users"]})
        assert (bad.status, bad.json()["error"]) == (400, "Unsupported configuration section")
        user = await self.register("eve")
        denied = await self.call("POST", "/api/settings/export", token=user["token"])
        assert denied.status == 403
        assert denied.header("content-disposition") is None

    async def test_round_trip_restores_the_configuration(self) -> None:
        await self.build_config()
        before = await self.catalog_state()
        settings_before = await self.ctx.db.transaction(read_settings)
        doc = await self.export()
        await self.wipe_catalog()
        await self.api("PUT", "/api/settings", {"site_name": "Changed", "smtp_password": "x"})
        self.announced.clear()
        response = await self.api("POST", "/api/settings/import", doc)
        assert response.status == 200, response
        assert response.json() == {"imported_sections": doc["sections"]}
        assert await self.catalog_state() == before
        assert await self.ctx.db.transaction(read_settings) == settings_before
        assert self.ctx.settings.text("site_name") == "Acme AI"
        assert (CATALOG, b"") in self.announced or any(c == CATALOG for c, _ in self.announced)
        # importing the same file again changes nothing and duplicates nothing
        again = await self.api("POST", "/api/settings/import", doc)
        assert again.status == 200, again
        assert await self.catalog_state() == before

    async def test_import_merges_and_never_deletes(self) -> None:
        await self.build_config()
        doc = await self.export({"sections": ["channels"]})
        doc["user_channels"][0]["description"] = "edited"
        doc["user_channels"].append({"name": "new-uc", "multiplier": "2"})
        response = await self.api("POST", "/api/settings/import", doc)
        assert response.status == 200, response
        ucs = {r["name"]: r for r in await self.rows("user_channels")}
        assert ucs["standard"]["description"] == "edited"
        assert ucs["new-uc"]["multiplier_nanos"] == 2_000_000_000
        partial = {"version": 1, "sections": ["model_data"],
                   "models": [{"model_name": "brand-new"}]}
        assert (await self.api("POST", "/api/settings/import", partial)).status == 200
        names = [m["model_name"] for m in await self.rows("models")]
        assert sorted(names) == ["brand-new", "clip", "fast-small"]

    async def test_one_invalid_record_changes_nothing(self) -> None:
        await self.build_config()
        doc = await self.export()
        doc["system_settings"] = [s for s in doc["system_settings"] if s["key"] != "site_name"]
        doc["system_settings"].append({"key": "site_name", "value": "Renamed"})
        doc["models"].append({"model_name": "extra"})
        cases: list[tuple[str, Any]] = []
        bad = copy.deepcopy(doc)
        bad["channels"].append({"name": "evil", "type": "compat",
                                "base_url": "http://169.254.169.254/latest"})
        cases.append(("channels[2]: Unsafe or invalid base URL", bad))
        bad = copy.deepcopy(doc)
        bad["system_settings"].append({"key": "no_such_setting", "value": "1"})
        cases.append(("Unknown setting no_such_setting", bad))
        bad = copy.deepcopy(doc)
        bad["system_settings"].append({"key": "log_retention_days", "value": "0"})
        cases.append(("given twice", bad))
        bad = copy.deepcopy(doc)
        bad["system_settings"].append({"key": " ", "value": "0"})
        cases.append(("System setting key is required", bad))
        bad = copy.deepcopy(doc)
        bad["model_prices"].append({"model_name": "ghost", "input_price": "1"})
        cases.append(("Model price references a model that was not found", bad))
        bad = copy.deepcopy(doc)
        bad["channels"][0]["user_channel_name"] = "missing-uc"
        cases.append(("Referenced user channel was not found", bad))
        bad = copy.deepcopy(doc)
        bad["model_configs"].append({"channel_name": "nope", "channel_base_url": "https://x.io",
                                     "model_name": "fast-small"})
        cases.append(("not found", bad))
        bad = copy.deepcopy(doc)
        bad["model_prices"][0]["input_price"] = "-1"
        cases.append(("model_prices[0]", bad))
        bad = copy.deepcopy(doc)
        bad["channels"][0]["price_sync_cron"] = "every minute"
        cases.append(("cron", bad))
        bad = copy.deepcopy(doc)
        bad["version"] = 2
        cases.append(("Unsupported configuration export version", bad))
        bad = copy.deepcopy(doc)
        bad["sections"] = ["channels", "orders"]
        cases.append(("Unsupported configuration section", bad))
        for message, payload in cases:
            before = await self.snapshot(*ALL_TABLES)
            announced = len(self.announced)
            response = await self.api("POST", "/api/settings/import", payload)
            assert response.status == 400, (message, response)
            assert message in response.json()["error"], (message, response.json())
            assert await self.snapshot(*ALL_TABLES) == before, message
            assert len(self.announced) == announced
        assert self.ctx.settings.text("site_name") == "Acme AI"
        # the same document without the bad record goes through
        assert (await self.api("POST", "/api/settings/import", doc)).status == 200
        assert self.ctx.settings.text("site_name") == "Renamed"

    async def test_unparsable_and_wrong_shapes(self) -> None:
        await self.admin()
        for data in (b"{not json", b"[1, 2]", b'"text"'):
            response = await self.api("POST", "/api/settings/import", data=data)
            assert response.status == 400, (data, response)
            assert response.json()["error"] == "Invalid configuration file"
        odd = {"version": 1, "sections": ["model_data"], "models": {"model_name": "x"}}
        response = await self.api("POST", "/api/settings/import", odd)
        assert response.status == 400
        user = await self.register("mallory")
        denied = await self.call("POST", "/api/settings/import",
                                 {"version": 1, "sections": ["model_data"], "models": []},
                                 token=user["token"])
        assert denied.status == 403

    async def test_blank_secret_keeps_the_stored_one(self) -> None:
        await self.build_config()
        doc = {"version": 1, "sections": ["system_settings"],
               "system_settings": [{"key": "smtp_password", "value": ""},
                                   {"key": "setup_completed_at", "value": "forged"}]}
        stored = await self.ctx.db.transaction(read_settings)
        response = await self.api("POST", "/api/settings/import", doc)
        assert response.status == 200, response
        after = await self.ctx.db.transaction(read_settings)
        assert after["smtp_password"] == "smtp-SECRET"
        assert after.get("setup_completed_at") == stored.get("setup_completed_at")
        assert orjson.dumps(after) == orjson.dumps(stored)


class TransferPostgresTest(TransferTest):
    backend = "postgresql"
