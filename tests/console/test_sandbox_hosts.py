"""Sandbox hosts (agents contract §3.1 to §3.3, [P-16], [P-24], [P-25], [P-41])."""

from __future__ import annotations

import orjson

from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.link_client import connect

HOSTS = "/api/advanced-chat/sandbox-hosts"
AVAILABLE = "/api/user/advanced-chat/sandbox-hosts/available"


class SandboxHostTests(LinkTestCase):
    async def create_host(self, **fields: object) -> dict:
        body = {"name": "Host A", "cpu_price_hour": "0.5", "runtime_multiplier": 2,
                "security_policy": {"runtime": "docker", "max_cpu_cores": 8,
                                    "allowed_images": ["python:3.12-slim"]}}
        body.update(fields)
        response = await self.call("POST", HOSTS, body, token=await self.admin())
        assert response.status == 201, response
        return response.json()

    async def test_create_connect_capacity_and_available(self) -> None:
        created = await self.create_host()
        host, token = created["host"], created["token"]
        assert host["id"].startswith("ash-") and token.startswith("wpc_")
        assert created["command"] == (
            f"lockgate-connector -server {self.base} -token {token} -mode sandboxd "
            "-data-dir /var/lib/lockgate-sandboxd")
        assert (host["cpu_price_hour"], host["runtime_multiplier"], host["runtime_price_hour"]
                ) == ("0.5", "2", "0")
        assert orjson.loads(host["security_policy"])["max_cpu_cores"] == 8
        assert host["online"] is False and host["reported_capacity"] is None
        assert host["available_range"] == {
            "cpu_cores": {"min": 0, "min_exclusive": True, "max": 8},
            "memory_mb": {"min": 128, "max": 262144},
            "disk_gb": {"min": 1, "max": 4096}, "images": ["python:3.12-slim"]}
        # the host device is hidden from the admin's device list ([P-16])
        assert (await self.call("GET", DEVICES, token=await self.admin())).json() == []
        device_path = f"{DEVICES}/{host['connector_device_id']}"
        hidden = await self.call("GET", device_path, token=await self.admin())
        assert hidden.status == 404

        client = await connect(self.base, token)
        self.addCleanup(client.transport.abortConnection)
        welcome = await client.hello(mode="sandboxd", capacity={
            "cpu_cores": 16, "memory_mb": 4096, "disk_gb": 50})
        assert welcome["device"]["mode"] == "sandboxd"
        user = (await self.register("carol"))["token"]
        available = (await self.call("GET", AVAILABLE, token=user)).json()
        assert [item["id"] for item in available] == [host["id"]]
        assert available[0]["online"] is True
        assert available[0]["reported_capacity"] == {"cpu_cores": 16, "memory_mb": 4096,
                                                     "disk_gb": 50}
        assert available[0]["available_range"]["cpu_cores"]["max"] == 8
        assert available[0]["available_range"]["memory_mb"]["max"] == 4096
        assert available[0]["available_range"]["disk_gb"]["max"] == 50

        # a closed link makes the host offline at once ([P-41])
        client.sendClose(1000)
        await client.close_code()

        async def offline() -> bool:
            listed = (await self.call("GET", AVAILABLE, token=user)).json()
            return listed[0]["online"] is False

        await self.until(offline)

    async def test_disable_closes_the_link_4401_and_hides_the_host(self) -> None:
        created = await self.create_host()
        client = await connect(self.base, created["token"])
        self.addCleanup(client.transport.abortConnection)
        await client.hello(mode="sandboxd")
        response = await self.call("PUT", f"{HOSTS}/{created['host']['id']}",
                                   {"enabled": False}, token=await self.admin())
        assert response.json()["enabled"] is False
        assert await client.close_code() == 4401
        user = (await self.register("dave"))["token"]
        assert (await self.call("GET", AVAILABLE, token=user)).json() == []
        # a disabled host cannot link again, nor poll
        again = await connect(self.base, created["token"])
        self.addCleanup(again.transport.abortConnection)
        again.send({"type": "hello", "protocol": 1, "mode": "sandboxd"})
        assert await again.close_code() == 4401
        poll = await self.call("GET", "/api/advanced-chat/connectors/tasks/next",
                               headers={"X-Connector-Token": created["token"]})
        assert poll.status == 403

    async def test_rotate_and_update(self) -> None:
        created = await self.create_host()
        host_id = created["host"]["id"]
        client = await connect(self.base, created["token"])
        self.addCleanup(client.transport.abortConnection)
        await client.hello(mode="sandboxd")
        rotated = await self.call("POST", f"{HOSTS}/{host_id}/token", token=await self.admin())
        assert rotated.status == 200 and rotated.json()["token"] != created["token"]
        assert await client.close_code() == 4401
        updated = await self.call("PUT", f"{HOSTS}/{host_id}", {
            "name": "", "runtime_multiplier": 0, "storage_price_gb_hour": "0.01"},
            token=await self.admin())
        body = updated.json()
        assert (body["name"], body["runtime_multiplier"], body["storage_price_gb_hour"]) == (
            "Host A", "2", "0.01")
        listed = (await self.call("GET", HOSTS, token=await self.admin())).json()
        assert [item["id"] for item in listed] == [host_id]

    async def test_validation_and_permissions(self) -> None:
        admin = await self.admin()
        for body, message in (({}, "Host name is required"),
                              ({"name": "h", "security_policy": "[1]"},
                               "security_policy must be a JSON object"),
                              ({"name": "h", "cpu_price_hour": "-1"},
                               "Prices must not be negative")):
            response = await self.call("POST", HOSTS, body, token=admin)
            assert (response.status, response.json()["error"]) == (400, message)
        assert (await self.call("GET", HOSTS, token=admin)).json() == []
        user = (await self.register("erin"))["token"]
        refused = await self.call("GET", HOSTS, token=user)
        assert (refused.status, refused.json()["error"]) == (403, "Admin permission required")
        missing = await self.call("PUT", f"{HOSTS}/ash-missing", {"name": "x"}, token=admin)
        assert (missing.status, missing.json()["error"]) == (404, "Sandbox host not found")

    async def test_host_receives_every_users_tasks(self) -> None:
        created = await self.create_host()
        client = await connect(self.base, created["token"])
        self.addCleanup(client.transport.abortConnection)
        await client.hello(mode="sandboxd")
        user = (await self.register("fay"))["token"]
        task = await self.links_of().tasks.create(
            user_id=await self.user_id(user), device_id=created["host"]["connector_device_id"],
            action="run_command", payload={"command": "ls", "cloud_sandbox_id": "acs-x"},
            cloud_sandbox_id="acs-x")
        frame = await client.next_of("task")
        assert frame["task"]["id"] == task.id
        assert frame["task"]["workspace_unrestricted"] is True
