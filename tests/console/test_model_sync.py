"""Model sync routes (console contract §5.10) against real loopback upstreams."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from twisted.internet import reactor

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.catalog_fixtures import CatalogBuilder
from tests.support.names import ScriptedNames
from tests.support.scripted_upstream import ScriptedUpstream

LIST = {"object": "list", "data": [{"id": "gpt-4o"}, {"id": "fast-small"}, {"id": "gpt-4o"}]}


def snapshot(conn: Any) -> tuple[list[Any], list[Any]]:
    models = [tuple(row) for row in conn.execute(select(schema.models).order_by(
        schema.models.c.id))]
    configs = [tuple(row) for row in conn.execute(select(schema.channel_models).order_by(
        schema.channel_models.c.id))]
    return models, configs


class SyncCase(AppTestCase):
    async def prepare(self, *, allow_private: bool = True) -> None:
        self.token = await self.setup_admin()
        if allow_private:
            await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"},
                                              self.ctx.now())
        self.up = self.upstream()
        self.build = CatalogBuilder(self.ctx)
        self.uc = await self.build.user_channel("standard")
        self.channel = await self.build.channel(self.uc, "up-a", base_url=self.up.base_url,
                                                api_key="sk-upstream-secret")

    def upstream(self) -> ScriptedUpstream:
        server = ScriptedUpstream.start()
        self.addCleanup(server.stop)
        return server

    async def snapshot(self) -> Any:
        return await self.ctx.db.transaction(snapshot)

    async def post(self, path: str, body: Any) -> Any:
        return await self.call("POST", path, body, token=self.token)


class ModelSyncPreviewTests(SyncCase):
    async def test_each_format_reads_its_path_with_the_channel_key(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 200, LIST)
        self.up.answer("/models", 200, ["m-generic"])
        self.up.answer("/api/models", 200, {"success": True, "data": [{"id": "m-api"}]})
        self.up.answer("/custom/list?all=1", 200, {"models": [{"name": "models/m-custom"}]})
        before = await self.snapshot()
        cases = [("compat", None, "/v1/models", ["fast-small", "gpt-4o"]),
                 ("generic_models", None, "/models", ["m-generic"]),
                 ("api_models", None, "/api/models", ["m-api"]),
                 ("custom", "/custom/list?all=1", "/custom/list?all=1", ["m-custom"])]
        for fmt, path, source, names in cases:
            response = await self.post("/api/models/sync/preview", {
                "channel_id": self.channel, "format": fmt, "path": path})
            self.assertEqual(response.status, 200, response)
            body = response.json()
            self.assertEqual(body["channel_id"], self.channel)
            self.assertEqual(body["channel_name"], "up-a")
            self.assertEqual(body["source"], source)
            self.assertEqual([m["model_name"] for m in body["models"]], names)
            item = body["models"][0]
            self.assertEqual(item["input_price"], "0")
            self.assertEqual(item["quota_type"], 0)
            self.assertFalse(item["exists"])
        self.assertEqual(self.up.paths(), ["/v1/models", "/models", "/api/models",
                                           "/custom/list?all=1"])
        for seen in self.up.requests:
            self.assertEqual(seen.headers["authorization"], "Bearer sk-upstream-secret")
        self.assertEqual(await self.snapshot(), before)  # previews change nothing

    async def test_exists_and_provider(self) -> None:
        await self.prepare()
        model = await self.build.model("gpt-4o", provider="openai")
        await self.build.config(self.channel, model, upstream="gpt-4o")
        self.up.answer("/v1/models", 200, LIST)
        response = await self.post("/api/models/sync/preview", {"channel_id": self.channel})
        items = {m["model_name"]: m for m in response.json()["models"]}
        self.assertTrue(items["gpt-4o"]["exists"])
        self.assertEqual(items["gpt-4o"]["provider"], "openai")
        self.assertEqual(items["gpt-4o"]["provider_name"], "OpenAI")
        self.assertFalse(items["fast-small"]["exists"])
        self.assertEqual(items["fast-small"]["provider"], "custom")

    async def test_auto_falls_through_to_the_first_non_empty_list(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 404, {"error": "no"})
        self.up.answer("/models", 200, {"data": []})
        self.up.answer("/api/models", 200, {"data": [{"id": "third"}]})
        response = await self.post("/api/models/sync/preview", {
            "channel_id": self.channel, "format": "auto"})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.json()["source"], "/api/models")
        self.assertEqual([m["model_name"] for m in response.json()["models"]], ["third"])

    async def test_failing_upstream_lists_each_failure(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 500, {"error": "boom"})
        self.up.answer("/models", 200, "<html>")
        before = await self.snapshot()
        response = await self.post("/api/models/sync/preview", {"channel_id": self.channel})
        self.assertEqual(response.status, 502)
        message = response.json()["error"]
        self.assertIn("/v1/models: HTTP 500", message)
        self.assertIn("/models:", message)
        self.assertIn("/api/models: HTTP 404", message)
        self.assertNotIn("sk-upstream-secret", response.body.decode())
        self.assertEqual(await self.snapshot(), before)

    async def test_refused_upstream_connection(self) -> None:
        await self.prepare()
        closed = ScriptedUpstream.start()
        dead_url = closed.base_url
        await closed.stop()
        channel = await self.build.channel(self.uc, "dead", base_url=dead_url)
        response = await self.post("/api/models/sync/preview", {
            "channel_id": channel, "format": "compat"})
        self.assertEqual(response.status, 502)
        self.assertIn("/v1/models:", response.json()["error"])

    async def test_custom_full_url_never_takes_the_key_to_another_host(self) -> None:
        await self.prepare()
        other = self.upstream()
        other.answer("/steal", 200, LIST)
        self.up.answer("/steal", 200, {"data": [{"id": "own-host"}]})
        response = await self.post("/api/models/sync/preview", {
            "channel_id": self.channel, "format": "custom",
            "path": f"{other.base_url}/steal"})
        self.assertEqual(response.status, 200, response)
        self.assertEqual([m["model_name"] for m in response.json()["models"]], ["own-host"])
        self.assertEqual(other.requests, [])
        self.assertEqual(self.up.paths(), ["/steal"])

    async def test_bad_inputs(self) -> None:
        await self.prepare()
        response = await self.post("/api/models/sync/preview", {})
        self.assertEqual((response.status, response.json()["error"]),
                         (400, "Channel is required"))
        response = await self.post("/api/models/sync/preview", {"channel_id": 999})
        self.assertEqual((response.status, response.json()["error"]),
                         (404, "Channel not found"))
        response = await self.post("/api/models/sync/preview", {
            "channel_id": self.channel, "format": "gopher"})
        self.assertEqual(response.status, 400)
        self.assertEqual(response.json()["error"], "unsupported model list sync format")
        response = await self.post("/api/models/sync/preview", {
            "channel_id": self.channel, "format": "custom"})
        self.assertEqual((response.status, response.json()["error"]),
                         (400, "custom sync path is required"))
        self.assertEqual(self.up.requests, [])
        user = await self.register("plain")
        response = await self.call("POST", "/api/models/sync/preview",
                                   {"channel_id": self.channel}, token=user["token"])
        self.assertEqual(response.status, 403)

    async def test_private_upstream_refused_by_the_url_policy(self) -> None:
        await self.prepare(allow_private=False)
        self.up.answer("/v1/models", 200, LIST)
        response = await self.post("/api/models/sync/preview", {
            "channel_id": self.channel, "format": "compat"})
        self.assertEqual(response.status, 400)
        self.assertIn("unsafe upstream URL", response.json()["error"])
        self.assertIn("ssrf_allow_private_networks", response.json()["error"])
        self.assertEqual(self.up.requests, [])

    async def test_a_name_resolving_to_loopback_is_refused_at_connect_with_400(self) -> None:
        await self.prepare(allow_private=False)
        ScriptedNames({"models.evil.example": [["127.0.0.1"]]}).install(self, reactor)
        self.up.answer("/v1/models", 200, LIST)
        channel = await self.build.channel(
            self.uc, "named", base_url=f"http://models.evil.example:{self.up.port}",
            api_key="sk-upstream-secret")
        for path, body in (("/api/models/sync/preview", {"channel_id": channel}),
                           ("/api/models/prices/sync/preview", {"channel_id": channel})):
            response = await self.post(path, body)
            self.assertEqual(response.status, 400, response)
            error = response.json()["error"]
            self.assertIn("127.0.0.1", error)
            self.assertIn("ssrf_allow_private_networks", error)
        self.assertEqual(self.up.requests, [])
        # allowed by the policy, the same name is read (the connector is not in the way)
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"},
                                          self.ctx.now())
        response = await self.post("/api/models/sync/preview", {"channel_id": channel})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(self.up.requests[0].headers["host"],
                         f"models.evil.example:{self.up.port}")

    async def test_browser_preview_makes_no_request(self) -> None:
        await self.prepare()
        before = await self.snapshot()
        for key, payload in (("payload", LIST), ("body", '{"data":[{"id":"pasted"}]}'),
                             ("payload", ["a", "b"])):
            response = await self.post("/api/models/sync/preview/browser", {
                "channel_id": self.channel, "source": "https://x/v1/models", key: payload})
            self.assertEqual(response.status, 200, response)
            self.assertEqual(response.json()["source"], "https://x/v1/models")
            self.assertTrue(response.json()["models"])
        response = await self.post("/api/models/sync/preview/browser", {
            "channel_id": self.channel, "payload": ["x"]})
        self.assertEqual(response.json()["source"], "browser")
        response = await self.post("/api/models/sync/preview/browser", {
            "channel_id": self.channel, "payload": None})
        self.assertEqual((response.status, response.json()["error"]),
                         (400, "Payload is required"))
        response = await self.post("/api/models/sync/preview/browser", {
            "channel_id": self.channel, "payload": "not json"})
        self.assertEqual(response.status, 400)
        self.assertEqual(self.up.requests, [])
        self.assertEqual(await self.snapshot(), before)


class ModelSyncApplyTests(SyncCase):
    async def configs(self) -> list[dict[str, Any]]:
        response = await self.call("GET", f"/api/channels/{self.channel}/models",
                                   token=self.token)
        assert response.status == 200, response
        return response.json()

    async def test_apply_creates_then_is_idempotent_and_reenables(self) -> None:
        await self.prepare()
        response = await self.post("/api/models/sync/apply", {
            "channel_id": self.channel,
            "models": [{"model_name": "gpt-4o", "exists": False}, {"model_name": "m2"}]})
        self.assertEqual(response.status, 200, response)
        self.assertEqual(response.json(), {"results": [{
            "channel_id": self.channel, "channel_name": "up-a", "source": "selected",
            "created": 2, "updated": 0}]})
        configs = await self.configs()
        self.assertEqual(sorted((c["model_name"], c["upstream_model_name"], c["enabled"])
                                for c in configs),
                         [("gpt-4o", "gpt-4o", True), ("m2", "m2", True)])
        models = {m["model_name"]: m for m in (await self.call(
            "GET", "/api/models", token=self.token)).json()}
        self.assertEqual(models["gpt-4o"]["provider"], "openai")
        self.assertTrue(models["m2"]["enabled"])
        # the gateway's in-memory catalog was told (CATALOG announced)
        self.assertIn("gpt-4o", self.ctx.catalog.snapshot.models_by_name)
        # again: nothing new; a disabled config comes back
        config_id = next(c["id"] for c in configs if c["model_name"] == "m2")
        await self.build.set(schema.channel_models, config_id, enabled=False)
        response = await self.post("/api/models/sync/apply", {
            "channel_id": self.channel, "items": [{"model_name": "gpt-4o"},
                                                  {"model_name": "m2"}]})
        result = response.json()["results"][0]
        self.assertEqual((result["created"], result["updated"]), (0, 1))
        self.assertTrue(all(c["enabled"] for c in await self.configs()))

    async def test_apply_never_changes_an_existing_model(self) -> None:
        await self.prepare()
        await self.build.model("kept", input="5", enabled=False, provider="acme")
        response = await self.post("/api/models/sync/apply", {
            "channel_id": self.channel, "models": [{"model_name": "kept"}]})
        self.assertEqual(response.json()["results"][0]["created"], 1)
        model = next(m for m in (await self.call("GET", "/api/models", token=self.token)
                                 ).json() if m["model_name"] == "kept")
        self.assertEqual((model["input_price"], model["enabled"], model["provider"]),
                         ("5", False, "acme"))

    async def test_bad_apply_changes_nothing(self) -> None:
        await self.prepare()
        before = await self.snapshot()
        for body, message in (
            ({"channel_id": self.channel, "models": []}, "No models selected"),
            ({"channel_id": self.channel}, "No models selected"),
            ({"channel_id": self.channel, "models": [{"model_name": "ok"}, {"model_name": ""}]},
             "models[1]: model_name is required"),
            ({"channel_id": self.channel, "models": [{"model_name": "x" * 101}]},
             "models[0]: model_name is required"),
        ):
            response = await self.post("/api/models/sync/apply", body)
            self.assertEqual((response.status, response.json()["error"]), (400, message))
        response = await self.post("/api/models/sync/apply", {
            "channel_id": 12345, "models": [{"model_name": "m"}]})
        self.assertEqual(response.status, 404)
        self.assertEqual(await self.snapshot(), before)


class ModelSyncAllTests(SyncCase):
    async def test_sync_all_enabled_channels_reports_per_channel(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 200, LIST)
        failing = self.upstream()
        failing.answer("/v1/models", 503, {})
        bad = await self.build.channel(self.uc, "up-bad", base_url=failing.base_url)
        off_server = self.upstream()
        off = await self.build.channel(self.uc, "up-off", base_url=off_server.base_url,
                                       enabled=False)
        response = await self.post("/api/models/sync", {})
        self.assertEqual(response.status, 200, response)
        results = {r["channel_id"]: r for r in response.json()["results"]}
        self.assertEqual(set(results), {self.channel, bad})
        good = results[self.channel]
        self.assertEqual((good["source"], good["created"], good["updated"]),
                         ("/v1/models", 2, 0))
        self.assertIn("HTTP 503", results[bad]["error"])
        self.assertEqual((results[bad]["created"], results[bad]["updated"]), (0, 0))
        self.assertEqual(off_server.requests, [])
        # an explicit list may name a disabled channel; unknown ids are refused
        off_server.answer("/v1/models", 200, ["only-off"])
        response = await self.post("/api/models/sync", {"channel_ids": [off]})
        self.assertEqual(response.json()["results"][0]["created"], 1)
        response = await self.post("/api/models/sync", {"channel_ids": [off, 4242]})
        self.assertEqual(response.status, 400)
        # empty body works too
        response = await self.call("POST", "/api/models/sync", token=self.token)
        self.assertEqual(response.status, 200)
        self.assertEqual({r["channel_id"]: r["created"] for r in response.json()["results"]},
                         {self.channel: 0, bad: 0})


    async def test_one_channel_with_an_unsendable_key_does_not_break_the_others(self) -> None:
        await self.prepare()
        self.up.answer("/v1/models", 200, LIST)
        other = self.upstream()
        other.answer("/v1/models", 200, ["other-model"])
        # stored before keys were checked on save (or by an import of old data)
        broken = await self.build.channel(self.uc, "broken", base_url=other.base_url,
                                          api_key="sk-\u2603\x00")
        response = await self.post("/api/models/sync", {})
        self.assertEqual(response.status, 200, response)
        results = {r["channel_id"]: r for r in response.json()["results"]}
        self.assertEqual((results[self.channel]["created"], results[self.channel]["updated"]),
                         (2, 0))
        self.assertIn("error", results[broken])
        self.assertEqual(other.requests, [])  # nothing was sent with a mangled key


class PostgresModelSyncApplyTests(ModelSyncApplyTests):
    backend = "postgresql"
