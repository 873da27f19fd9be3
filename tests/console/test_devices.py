"""Device management routes (agents contract §2.1, [P-16]…[P-18])."""

from __future__ import annotations

import hashlib

from gateway.store import devices as device_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase


class DeviceRouteTests(LinkTestCase):
    async def test_create_list_get_update_delete(self) -> None:
        login, token, device = await self.user_with_device(name="  Laptop  ")
        assert token.startswith("wpc_") and len(token) == 56
        assert device["id"].startswith("acd-") and len(device["id"]) == 20
        assert (device["name"], device["status"], device["online"], device["mode"]) == (
            "Laptop", "offline", False, "platform")
        stored = await self.app.db.transaction(device_store.get, device["id"])
        assert stored is not None
        assert stored.token_hash == hashlib.sha256(token.encode()).hexdigest()

        web = await self.call("POST", f"{DEVICES}/token", {
            "name": "Site", "mode": "web_server", "remark": "r"}, token=login)
        assert web.json()["device"]["mode"] == "web_server"
        assert web.json()["device"]["listen_port"] == 8080
        sneaky = await self.call("POST", f"{DEVICES}/token", {"name": "X", "mode": "sandboxd"},
                                 token=login)
        assert sneaky.json()["device"]["mode"] == "platform"

        listed = (await self.call("GET", DEVICES, token=login)).json()
        assert {item["name"] for item in listed} == {"Laptop", "Site", "X"}

        renamed = await self.call("PUT", f"{DEVICES}/{device['id']}",
                                  {"name": "Desk", "remark": "home"}, token=login)
        assert (renamed.json()["name"], renamed.json()["remark"]) == ("Desk", "home")
        gone = await self.call("DELETE", f"{DEVICES}/{device['id']}", token=login)
        assert gone.json() == {"message": "Device deleted"}
        again = await self.call("DELETE", f"{DEVICES}/{device['id']}", token=login)
        assert again.json() == {"message": "Device deleted"}
        missing = await self.call("GET", f"{DEVICES}/{device['id']}", token=login)
        assert (missing.status, missing.json()["error"]) == (404, "Device not found")

    async def test_validation(self) -> None:
        login, _, device = await self.user_with_device()
        for body in ({}, {"name": "   "}):
            response = await self.call("POST", f"{DEVICES}/token", body, token=login)
            assert (response.status, response.json()["error"]) == (
                400, "Device name is required")
        response = await self.call("PUT", f"{DEVICES}/{device['id']}", {"name": ""},
                                   token=login)
        assert (response.status, response.json()["error"]) == (400, "Device name is required")
        long_name = await self.call("POST", f"{DEVICES}/token", {"name": "n" * 300},
                                    token=login)
        assert len(long_name.json()["device"]["name"]) == 120
        bad_port = await self.call("POST", f"{DEVICES}/token", {
            "name": "w", "mode": "web_server", "listen_port": 70000}, token=login)
        assert bad_port.status == 400
        bad_limit = await self.call("GET", f"{DEVICES}/{device['id']}/tasks?limit=0",
                                    token=login)
        assert bad_limit.status == 400
        listed = (await self.call("GET", DEVICES, token=login)).json()
        assert len(listed) == 2  # the refused requests created nothing

    async def test_another_users_device_is_a_404(self) -> None:
        _, _, device = await self.user_with_device("alice")
        bob = (await self.register("bob"))["token"]
        for method, path in (("GET", ""), ("PUT", ""), ("POST", "/token"), ("GET", "/tasks")):
            response = await self.call(method, f"{DEVICES}/{device['id']}{path}",
                                       {"name": "mine"}, token=bob)
            assert (response.status, response.json()["error"]) == (404, "Device not found")
        await self.call("DELETE", f"{DEVICES}/{device['id']}", token=bob)
        assert await self.app.db.transaction(device_store.get, device["id"]) is not None
        assert (await self.call("GET", DEVICES, token=bob)).json() == []

    async def test_rotation_replaces_the_token(self) -> None:
        login, token, device = await self.user_with_device()
        rotated = await self.call("POST", f"{DEVICES}/{device['id']}/token", token=login)
        new = rotated.json()["token"]
        stored = await self.app.db.transaction(device_store.get, device["id"])
        assert stored is not None
        assert stored.token_hash == hashlib.sha256(new.encode()).hexdigest()
        old = await self.call("POST", "/api/advanced-chat/connectors/heartbeat",
                              headers={"X-Connector-Token": token})
        assert old.status == 401
        fresh = await self.call("POST", "/api/advanced-chat/connectors/heartbeat",
                                headers={"X-Connector-Token": new})
        assert fresh.json() == {"ok": True, "device_id": device["id"]}

    async def test_online_window_is_sixty_seconds(self) -> None:
        login, token, device = await self.user_with_device()
        await self.call("POST", "/api/advanced-chat/connectors/register",
                        headers={"X-Connector-Token": token})
        assert (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()[
            "online"] is True
        self.clock.advance(61)
        shown = (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()
        assert (shown["online"], shown["status"]) == (False, "offline")
