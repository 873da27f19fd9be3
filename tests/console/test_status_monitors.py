"""Admin status monitor routes and the public status page (contract §3.3, §5.14)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from gateway.store import schema
from tests.support.app import AppTestCase
from tests.support.scripted_upstream import ScriptedUpstream


class StatusMonitorCase(AppTestCase):
    async def prepare(self, *, allow_private: bool = True) -> None:
        self.token = await self.setup_admin()
        if allow_private:
            await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"},
                                              self.ctx.now())
        self.up = ScriptedUpstream.start()
        self.addCleanup(self.up.stop)

    async def create(self, **body: Any) -> Any:
        return await self.call("POST", "/api/status-monitors", body, token=self.token)

    async def counts(self) -> tuple[int, int]:
        def run(conn: Any) -> tuple[int, int]:
            monitors = conn.execute(select(func.count()).select_from(
                schema.status_monitors)).scalar_one()
            checks = conn.execute(select(func.count()).select_from(
                schema.status_checks)).scalar_one()
            return int(monitors), int(checks)

        return await self.ctx.db.transaction(run)


class AdminRouteTests(StatusMonitorCase):
    async def test_create_defaults_aliases_and_clamps(self) -> None:
        await self.prepare()
        response = await self.create(name="Gateway", target=self.up.base_url + "/health",
                                     interval_seconds=3, retention_hours=99999,
                                     method="POST")
        self.assertEqual(response.status, 200, response)
        body = response.json()
        self.assertEqual(body["target_url"], self.up.base_url + "/health")
        self.assertEqual(body["target"], body["target_url"])
        self.assertEqual((body["check_type"], body["type"], body["method"]),
                         ("http", "http", "GET"))
        self.assertEqual((body["interval_seconds"], body["retention_hours"]), (10, 8760))
        self.assertEqual((body["enabled"], body["last_status"], body["recent_checks"]),
                         (True, "pending", []))
        self.assertIsNone(body["last_checked_at"])
        response = await self.create(name="db", type="tcp", target_url="127.0.0.1:5432",
                                     interval_seconds=0, enabled=False, method="head")
        body = response.json()
        self.assertEqual((body["check_type"], body["interval_seconds"], body["enabled"],
                          body["method"], body["retention_hours"]),
                         ("tcp", 60, False, "HEAD", 168))
        listed = (await self.call("GET", "/api/status-monitors", token=self.token)).json()
        self.assertEqual(sorted(m["name"] for m in listed), ["Gateway", "db"])

    async def test_validation_changes_nothing(self) -> None:
        await self.prepare()
        for body, status, message in (
            ({"target": "http://x.example/"}, 400, "Name is required"),
            ({"name": "a"}, 400, "Target URL is required"),
            ({"name": "a", "target": "ftp://x.example/"}, 400, "Unsafe or invalid target URL"),
            ({"name": "a", "target": "http://169.254.169.254/"}, 400,
             "Unsafe or invalid target URL"),
            ({"name": "a", "type": "tcp", "target": "x.example"}, 400,
             "Unsafe or invalid target URL"),
            ({"name": "a", "type": "icmp", "target": "x.example"}, 400,
             "check_type must be http or tcp"),
        ):
            response = await self.create(**body)
            self.assertEqual((response.status, response.json()["error"]), (status, message))
        self.assertEqual(await self.counts(), (0, 0))
        user = await self.register("someone")
        response = await self.call("GET", "/api/status-monitors", token=user["token"])
        self.assertEqual(response.status, 403)

    async def test_private_targets_follow_the_url_policy(self) -> None:
        await self.prepare(allow_private=False)
        response = await self.create(name="a", target="http://127.0.0.1:8080/")
        self.assertEqual(response.status, 400)
        response = await self.create(name="a", target="https://status.example/")
        self.assertEqual(response.status, 200)

    async def test_update_replaces_and_keeps_enabled(self) -> None:
        await self.prepare()
        created = (await self.create(name="a", target="https://a.example/", enabled=False,
                                     interval_seconds=120)).json()
        response = await self.call("PUT", f"/api/status-monitors/{created['id']}",
                                   {"name": "b", "target": "https://b.example/"},
                                   token=self.token)
        self.assertEqual(response.status, 200, response)
        body = response.json()
        self.assertEqual((body["name"], body["target_url"], body["enabled"],
                          body["interval_seconds"]), ("b", "https://b.example/", False, 60))
        response = await self.call("PUT", "/api/status-monitors/999",
                                   {"name": "b", "target": "https://b.example/"},
                                   token=self.token)
        self.assertEqual((response.status, response.json()["error"]),
                         (404, "Status monitor not found"))
        response = await self.call("PUT", f"/api/status-monitors/{created['id']}",
                                   {"name": "", "target": "https://b.example/"},
                                   token=self.token)
        self.assertEqual(response.status, 400)
        self.assertEqual((await self.call("GET", f"/api/status-monitors/{created['id']}",
                                          token=self.token)).json()["name"], "b")

    async def test_check_now_records_history_and_delete_removes_it(self) -> None:
        await self.prepare()
        self.up.answer("/ok", 204, b"")
        created = (await self.create(name="a", target=self.up.base_url + "/ok",
                                     enabled=False)).json()
        path = f"/api/status-monitors/{created['id']}"
        response = await self.call("POST", path + "/check", token=self.token)
        self.assertEqual(response.status, 200, response)
        check = response.json()
        self.assertEqual((check["status"], check["status_code"], check["message"]),
                         ("up", 204, "HTTP 204"))
        self.assertEqual(check["monitor_id"], created["id"])
        self.assertTrue(check["checked_at"].endswith("Z"))
        self.up.answer("/ok", 500, b"")
        await self.call("POST", path + "/check", token=self.token)
        body = (await self.call("GET", path, token=self.token)).json()
        self.assertEqual((body["last_status"], body["last_status_code"], body["last_message"]),
                         ("down", 500, "HTTP 500"))
        self.assertEqual([(c["status"], c.get("status_code")) for c in body["recent_checks"]],
                         [("up", 204), ("down", 500)])
        self.assertEqual(await self.counts(), (1, 2))
        response = await self.call("POST", "/api/status-monitors/999/check", token=self.token)
        self.assertEqual(response.status, 404)
        response = await self.call("DELETE", "/api/status-monitors/abc", token=self.token)
        self.assertEqual((response.status, response.json()["error"]),
                         (400, "Invalid status monitor id"))
        response = await self.call("DELETE", path, token=self.token)
        self.assertEqual(response.json(), {"message": "Status monitor deleted"})
        self.assertEqual(await self.counts(), (0, 0))
        response = await self.call("DELETE", path, token=self.token)
        self.assertEqual(response.status, 404)

    async def test_recent_checks_capped_at_30(self) -> None:
        await self.prepare()
        self.up.answer("/ok", 200, {})
        created = (await self.create(name="a", target=self.up.base_url + "/ok")).json()
        for _ in range(32):
            self.clock.advance(1)
            await self.call("POST", f"/api/status-monitors/{created['id']}/check",
                            token=self.token)
        body = (await self.call("GET", f"/api/status-monitors/{created['id']}",
                                token=self.token)).json()
        self.assertEqual(len(body["recent_checks"]), 30)
        times = [c["checked_at"] for c in body["recent_checks"]]
        self.assertEqual(times, sorted(times))  # oldest -> newest


class PublicStatusTests(StatusMonitorCase):
    async def test_404_while_disabled(self) -> None:
        await self.prepare()
        response = await self.call("GET", "/api/public/status")
        self.assertEqual((response.status, response.json()["error"]), (404, "Not found"))

    async def test_public_page_with_uptime(self) -> None:
        await self.prepare()
        await self.ctx.live_settings.save({"status_monitor_enabled": "true"}, self.ctx.now())
        self.up.answer("/ok", 200, {})
        b = (await self.create(name="b-api", target=self.up.base_url + "/ok")).json()
        await self.create(name="a-new", target=self.up.base_url + "/ok")
        await self.create(name="hidden", target=self.up.base_url + "/ok", enabled=False)
        for status in (200, 200, 500):
            self.up.answer("/ok", status, {})
            self.clock.advance(1)
            await self.call("POST", f"/api/status-monitors/{b['id']}/check", token=self.token)
        response = await self.call("GET", "/api/public/status")
        self.assertEqual(response.status, 200, response)
        body = response.json()
        self.assertTrue(body["enabled"])
        self.assertTrue(body["generated_at"].endswith("Z"))
        self.assertEqual([m["name"] for m in body["monitors"]], ["a-new", "b-api"])
        fresh, checked = body["monitors"]
        self.assertEqual((fresh["status"], fresh["uptime"], fresh["recent_checks"]),
                         ("pending", 0, []))
        self.assertEqual(checked["status"], "down")
        self.assertEqual(checked["uptime"], 66.67)
        self.assertEqual([c["status"] for c in checked["recent_checks"]],
                         ["up", "up", "down"])
        self.assertEqual(set(checked["recent_checks"][0]),
                         {"status", "latency_ms", "checked_at"})


class PostgresAdminRouteTests(AdminRouteTests):
    backend = "postgresql"


class PostgresPublicStatusTests(PublicStatusTests):
    backend = "postgresql"
