"""Price sync routes (console contract §5.10) against real loopback upstreams."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gateway.store import schema
from tests.console.test_model_sync import SyncCase

NEWAPI = {"success": True, "data": [
    {"model_name": "gpt-4o", "quota_type": 0, "model_ratio": 1.25, "completion_ratio": 4,
     "model_price": 0},
    {"model_name": "dall-e-3", "quota_type": 1, "model_ratio": 0, "model_price": 0.04},
]}
LEGACY = {"data": {"model_ratio": {"legacy-m": 0.5}, "completion_ratio": {"legacy-m": 3}}}


class PriceSyncTests(SyncCase):
    async def models(self) -> dict[str, dict[str, Any]]:
        response = await self.call("GET", "/api/models", token=self.token)
        assert response.status == 200, response
        return {m["model_name"]: m for m in response.json()}

    async def test_newapi_pricing_is_read_without_the_key(self) -> None:
        await self.prepare()
        await self.build.model("gpt-4o", input="1")
        self.up.answer("/api/pricing", 200, NEWAPI)
        before = await self.snapshot()
        response = await self.post("/api/models/prices/sync/preview", {
            "channel_id": self.channel, "format": "newapi_pricing"})
        self.assertEqual(response.status, 200, response)
        body = response.json()
        self.assertEqual(body["source"], "/api/pricing")
        items = {m["model_name"]: m for m in body["models"]}
        self.assertEqual((items["gpt-4o"]["input_price"], items["gpt-4o"]["output_price"]),
                         ("2.5", "10"))
        self.assertTrue(items["gpt-4o"]["exists"])
        self.assertEqual(items["gpt-4o"]["provider_name"], "OpenAI")
        self.assertEqual((items["dall-e-3"]["quota_type"], items["dall-e-3"]["output_price"]),
                         (1, "0.04"))
        self.assertFalse(items["dall-e-3"]["exists"])
        self.assertEqual(self.up.paths(), ["/api/pricing"])
        self.assertNotIn("authorization", self.up.requests[0].headers)
        self.assertEqual(await self.snapshot(), before)

    async def test_auto_falls_back_to_legacy_prices(self) -> None:
        await self.prepare()
        self.up.answer("/api/pricing", 500, {})
        self.up.answer("/api/prices", 200, LEGACY)
        response = await self.post("/api/models/prices/sync/preview",
                                   {"channel_id": self.channel})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.json()["source"], "/api/prices")
        item = response.json()["models"][0]
        self.assertEqual((item["model_name"], item["input_price"], item["output_price"]),
                         ("legacy-m", "1", "3"))
        # /api/prices is not the public pricing page: it gets the key
        self.assertEqual(self.up.requests[1].headers["authorization"],
                         "Bearer sk-upstream-secret")

    async def test_model_list_formats_and_custom_path(self) -> None:
        await self.prepare()
        self.up.answer("/models", 200, {"data": [{"id": "a", "input_price": "0.5"}]})
        self.up.answer("/api/models", 200, [{"id": "b", "price": 1}])
        self.up.answer("/p/list", 200, {"items": [{"name": "c", "prompt": 1,
                                                   "completion": 2}]})
        for fmt, path, name, output in (("models", None, "a", "1"),
                                        ("oneapi_models", None, "b", "2"),
                                        ("custom", "https://elsewhere.example/p/list", "c",
                                         "4")):
            response = await self.post("/api/models/prices/sync/preview", {
                "channel_id": self.channel, "format": fmt, "path": path})
            self.assertEqual(response.status, 200, response)
            item = response.json()["models"][0]
            self.assertEqual((item["model_name"], item["output_price"]), (name, output))

    async def test_failing_upstream(self) -> None:
        await self.prepare()
        before = await self.snapshot()
        response = await self.post("/api/models/prices/sync/preview",
                                   {"channel_id": self.channel})
        self.assertEqual(response.status, 502)
        self.assertIn("/api/pricing: HTTP 404", response.json()["error"])
        self.up.answer("/api/pricing", 200, {"success": True, "data": []})
        self.up.answer("/api/prices", 200, {"success": True, "data": []})
        response = await self.post("/api/models/prices/sync/preview",
                                   {"channel_id": self.channel})
        self.assertIn("no prices found", response.json()["error"])
        response = await self.post("/api/models/prices/sync/preview",
                                   {"channel_id": self.channel, "format": "nope"})
        self.assertEqual(response.status, 400)
        self.assertEqual(await self.snapshot(), before)

    async def test_browser_preview_makes_no_request(self) -> None:
        await self.prepare()
        before = await self.snapshot()
        response = await self.post("/api/models/prices/sync/preview/browser", {
            "channel_id": self.channel, "source": "pasted", "body": NEWAPI})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.json()["source"], "pasted")
        self.assertEqual(len(response.json()["models"]), 2)
        response = await self.post("/api/models/prices/sync/preview/browser", {
            "channel_id": self.channel})
        self.assertEqual((response.status, response.json()["error"]),
                         (400, "Payload is required"))
        self.assertEqual(self.up.requests, [])
        self.assertEqual(await self.snapshot(), before)

    async def test_apply_creates_and_overwrites_global_models(self) -> None:
        await self.prepare()
        await self.build.model("gpt-4o", input="1", output="1", enabled=False,
                               provider="custom")
        preview = await self.post("/api/models/prices/sync/preview/browser", {
            "channel_id": self.channel, "payload": NEWAPI})
        tiers = [{"min_tokens": 100000, "price": "5"}]
        items = preview.json()["models"]
        next(i for i in items if i["model_name"] == "gpt-4o")["input_price_tiers"] = tiers
        response = await self.post("/api/models/prices/sync/apply", {
            "channel_id": self.channel, "models": items})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.json(), {"results": [{
            "channel_id": self.channel, "channel_name": "up-a", "source": "prices",
            "created": 1, "updated": 1}]})
        models = await self.models()
        gpt = models["gpt-4o"]
        self.assertEqual((gpt["input_price"], gpt["output_price"], gpt["cached_input_price"]),
                         ("2.5", "10", "2.5"))
        self.assertEqual(gpt["input_price_tiers"], [{"min_tokens": 100000, "price": "5",
                                                     "condition": ""}])
        self.assertEqual(gpt["provider"], "openai")
        self.assertFalse(gpt["enabled"])  # price sync does not re-enable
        dalle = models["dall-e-3"]
        self.assertEqual((dalle["quota_type"], dalle["output_price"], dalle["enabled"]),
                         (1, "0.04", True))
        self.assertEqual(self.ctx.catalog.snapshot.models_by_name["dall-e-3"].quota_type, 1)

    async def test_one_invalid_item_changes_nothing(self) -> None:
        await self.prepare()
        await self.build.model("gpt-4o", input="1")
        before = await self.snapshot()
        for models, message in (
            ([{"model_name": "gpt-4o", "input_price": "3"},
              {"model_name": "new", "input_price": "-1"}], "models[1].input_price"),
            ([{"model_name": "new", "quota_type": 7}], "quota_type must be 0, 1 or 100"),
            ([{"model_name": "new", "output_price_tiers": "x"}], "output_price_tiers"),
            ([], "No models selected"),
        ):
            response = await self.post("/api/models/prices/sync/apply", {
                "channel_id": self.channel, "models": models})
            self.assertEqual(response.status, 400, response)
            self.assertIn(message, response.json()["error"])
        self.assertEqual(await self.snapshot(), before)


class ScheduledPriceSyncTests(SyncCase):
    @property
    def scheduler(self) -> Any:
        return self.app.background[2]

    async def channel_row(self, channel_id: int) -> dict[str, Any]:
        def run(conn: Any) -> dict[str, Any]:
            return dict(conn.execute(select(schema.channels).where(
                schema.channels.c.id == channel_id)).mappings().one())

        return await self.ctx.db.transaction(run)

    async def models(self) -> dict[str, dict[str, Any]]:
        response = await self.call("GET", "/api/models", token=self.token)
        return {m["model_name"]: m for m in response.json()}

    async def test_cron_fires_and_updates_existing_models_only(self) -> None:
        await self.prepare()
        await self.build.model("gpt-4o", input="1")
        self.up.answer("/api/pricing", 200, NEWAPI)
        other = self.upstream()
        other.answer("/api/pricing", 200, NEWAPI)
        off = await self.build.channel(self.uc, "sync-off", base_url=other.base_url)
        disabled = await self.build.channel(self.uc, "disabled", base_url=other.base_url,
                                            enabled=False)
        await self.build.set(schema.channels, disabled, price_sync_enabled=True,
                             price_sync_cron="* * * * *")
        # the clock starts on a whole hour; hourly sync fires at the next one
        self.assertEqual(self.clock.seconds() % 3600, 0)
        await self.build.set(schema.channels, self.channel, price_sync_enabled=True,
                             price_sync_cron="0 * * * *")
        self.clock.advance(60)
        await self.scheduler.idle()
        self.assertEqual(self.up.requests, [])
        self.clock.advance(3540)
        await self.scheduler.idle()
        self.assertEqual(self.up.paths(), ["/api/pricing"])
        models = await self.models()
        self.assertEqual((models["gpt-4o"]["input_price"], models["gpt-4o"]["output_price"]),
                         ("2.5", "10"))
        self.assertNotIn("dall-e-3", models)  # schedules do not import new models
        row = await self.channel_row(self.channel)
        self.assertEqual(row["price_sync_last_at"], self.ctx.now())
        self.assertEqual(self.ctx.catalog.snapshot.models_by_name["gpt-4o"].quota_type, 0)
        # not again until the next hour; never for channels without sync or disabled ones
        self.clock.advance(60)
        await self.scheduler.idle()
        self.assertEqual(len(self.up.requests), 1)
        self.assertEqual(other.requests, [])
        self.assertIsNone((await self.channel_row(off))["price_sync_last_at"])

    async def test_failing_upstream_is_stamped_and_changes_nothing(self) -> None:
        await self.prepare()
        await self.build.model("gpt-4o", input="1")
        await self.build.set(schema.channels, self.channel, price_sync_enabled=True,
                             price_sync_cron="*/5 * * * *")
        before = await self.snapshot()
        self.clock.advance(300)
        await self.scheduler.idle()
        self.assertEqual(self.up.paths(), ["/api/pricing", "/api/prices"])
        self.assertEqual((await self.channel_row(self.channel))["price_sync_last_at"],
                         self.ctx.now())
        self.assertEqual(await self.snapshot(), before)


class PostgresPriceSyncTests(PriceSyncTests):
    backend = "postgresql"
