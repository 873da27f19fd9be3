"""The cloud sandbox routes (agents contract §3.4): validation texts, ownership, delete flow."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import select

from gateway.store import connector_tasks, schema
from tests.gateway.sandboxes.sandbox_case import SANDBOXES, SandboxCase

TABLES = ("cloud_sandboxes", "sandbox_charges", "connector_tasks", "ledger")


class CloudSandboxRouteTests(SandboxCase):
    async def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        def read(conn: Any) -> dict[str, list[dict[str, Any]]]:
            found = {}
            for name in TABLES:
                table = schema.metadata.tables[name]
                found[name] = [dict(r) for r in conn.execute(
                    select(table).order_by(*table.primary_key.columns)).mappings()]
            return found

        return await self.ctx.db.transaction(read)

    async def refused(self, body: Any, message: str, *, status: int = 400,
                      data: bytes | None = None) -> None:
        before = await self.snapshot()
        response = await self.call("POST", SANDBOXES, None if data else body, data=data,
                                   token=self.user_token)
        self.assertEqual(response.status, status, response)
        self.assertEqual(response.json()["error"], message)
        self.assertEqual(await self.snapshot(), before)

    async def test_create_and_read_back(self) -> None:
        await self.start()
        host_id, _ = await self.add_host()
        created = await self.create_sandbox(host_id, name="  my box ", cpu_cores=0.25,
                                            memory_mb="512", disk_gb=3)
        self.assertTrue(created["id"].startswith("acs-") and len(created["id"]) == 20)
        self.assertEqual({k: created[k] for k in (
            "user_id", "host_id", "name", "image", "cpu_cores", "memory_mb", "disk_gb",
            "status")}, {"user_id": self.alice, "host_id": host_id, "name": "my box",
                         "image": "python:3.12-slim", "cpu_cores": "0.25", "memory_mb": 512,
                         "disk_gb": 3, "status": "ready"})
        self.assertNotIn("storage_charged_at", created)
        self.assertRegex(created["created_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
        got = await self.call("GET", f"{SANDBOXES}/{created['id']}", token=self.user_token)
        self.assertEqual(got.json(), created)
        listed = await self.call("GET", SANDBOXES, token=self.user_token)
        self.assertEqual(listed.json(), [created])

    async def test_every_400_text(self) -> None:
        await self.start()
        host_id, _ = await self.add_host(policy=orjson.dumps({
            "allowed_images": ["python:3.12-slim"], "max_cpu_cores": 4,
            "max_memory_mb": 8192}).decode(), capacity={"disk_gb": 100})
        disabled, _ = await self.add_host(enabled=False, name="off")
        offline, _ = await self.add_host(online=False, name="away")
        good = {"host_id": host_id, "name": "b", "image": "python:3.12-slim",
                "cpu_cores": "1", "memory_mb": 1024, "disk_gb": 10}
        cases: list[tuple[dict[str, Any], str]] = [
            ({**good, "host_id": ""}, "Sandbox host is required"),
            ({k: v for k, v in good.items() if k != "host_id"}, "Sandbox host is required"),
            ({**good, "name": "   "}, "Sandbox name is required"),
            ({**good, "image": None}, "Container image is required"),
            ({**good, "host_id": "ash-nope"}, "Sandbox host is unavailable"),
            ({**good, "host_id": disabled}, "Sandbox host is unavailable"),
            ({**good, "host_id": offline}, "Sandbox host is unavailable"),
            ({**good, "cpu_cores": 0}, "CPU cores must be between 0 and 4"),
            ({**good, "cpu_cores": "4.000000001"}, "CPU cores must be between 0 and 4"),
            ({**good, "cpu_cores": "lots"}, "CPU cores must be between 0 and 4"),
            ({**good, "cpu_cores": True}, "CPU cores must be between 0 and 4"),
            ({**good, "memory_mb": 127}, "Memory must be between 128 MB and 8192 MB"),
            ({**good, "memory_mb": 8193}, "Memory must be between 128 MB and 8192 MB"),
            ({**good, "memory_mb": 512.5}, "Memory must be between 128 MB and 8192 MB"),
            ({**good, "disk_gb": 0}, "Disk must be between 1 GB and 100 GB"),
            ({**good, "disk_gb": 101}, "Disk must be between 1 GB and 100 GB"),
            ({**good, "image": "node:22"}, "Container image is not allowed by this host policy"),
            ({**good, "name": "n" * 121}, "Sandbox name must be at most 120 characters"),
        ]
        for body, message in cases:
            await self.refused(body, message)
        await self.refused(None, "request body must be a JSON object", data=b"[1]")
        # the good body itself is accepted at the range's edges
        await self.create_sandbox(host_id, cpu_cores="4", memory_mb=8192, disk_gb=100)

    async def test_default_limits_give_the_origin_texts(self) -> None:
        await self.start()
        host_id, _ = await self.add_host()
        await self.refused({"host_id": host_id, "name": "b", "image": "i", "cpu_cores": 65,
                            "memory_mb": 1024, "disk_gb": 1}, "CPU cores must be between 0 and 64")
        await self.refused({"host_id": host_id, "name": "b", "image": "i", "cpu_cores": 1,
                            "memory_mb": 262145, "disk_gb": 1},
                           "Memory must be between 128 MB and 262144 MB")
        await self.refused({"host_id": host_id, "name": "b", "image": "i", "cpu_cores": 1,
                            "memory_mb": 128, "disk_gb": 4097},
                           "Disk must be between 1 GB and 4096 GB")

    async def test_another_users_sandbox_is_not_found(self) -> None:
        await self.start()
        bob_token = (await self.register("bob"))["token"]
        host_id, _ = await self.add_host()
        mine = await self.create_sandbox(host_id)
        path = f"{SANDBOXES}/{mine['id']}"
        before = await self.snapshot()
        for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/charges")):
            response = await self.call(method, path + suffix, token=bob_token)
            self.assertEqual((response.status, response.json()["error"]),
                             (404, "Cloud sandbox not found"), (method, suffix))
        self.assertEqual((await self.call("GET", SANDBOXES, token=bob_token)).json(), [])
        self.assertEqual(await self.snapshot(), before)
        missing = await self.call("GET", f"{SANDBOXES}/acs-aaaaaaaaaaaaaaaa/charges",
                                  token=self.user_token)
        self.assertEqual(missing.status, 404)

    async def test_get_does_not_depend_on_the_host_state(self) -> None:
        await self.start()
        host_id, device_id = await self.add_host()
        box = await self.create_sandbox(host_id)
        await self.set_online(device_id, False)
        got = await self.call("GET", f"{SANDBOXES}/{box['id']}", token=self.user_token)
        self.assertEqual(got.status, 200)

    async def test_delete_settles_storage_fails_waiting_tasks_and_queues_cleanup(self) -> None:
        await self.start()
        host_id, device_id = await self.add_host(storage_price_gb_hour="0.01")
        box = await self.create_sandbox(host_id, disk_gb=20)
        other = await self.create_sandbox(host_id, name="other")

        def waiting(conn: Any, sandbox_id: str, status: str) -> str:
            task = connector_tasks.create(
                conn, task_id=f"act-{status[:4]}{sandbox_id[-8:]}", user_id=self.alice,
                device_id=device_id, action="run_command", payload={"command": "ls"},
                workspace_path="", status=status, now=self.ctx.now(),
                cloud_sandbox_id=sandbox_id)
            return task.id

        pending = await self.ctx.db.transaction(waiting, box["id"], "pending_approval")
        queued = await self.ctx.db.transaction(waiting, box["id"], "queued")
        elsewhere = await self.ctx.db.transaction(waiting, other["id"], "queued")
        # half an hour of 20 GB at 0.01 = 0.1 (less than the storage job's interval)
        self.clock.advance(1800)
        deleted = await self.call("DELETE", f"{SANDBOXES}/{box['id']}", token=self.user_token)
        self.assertEqual((deleted.status, deleted.json()), (200, {"ok": True}))

        charges = await self.charges(box["id"])
        self.assertEqual([(c["kind"], c["quantity"], c["cost_nanos"]) for c in charges],
                         [("storage", "0.5", 100_000_000)])
        self.assertEqual(await self.balance(self.alice), 100_000_000_000 - 100_000_000)
        tasks = await self.ctx.db.transaction(lambda conn: {
            t.id: t for t in connector_tasks.list_for_device(conn, device_id, 50)})
        for task_id in (pending, queued):
            self.assertEqual((tasks[task_id].status, tasks[task_id].error_message),
                             ("failed", "cloud sandbox deleted"))
        self.assertEqual(tasks[elsewhere].status, "queued")
        cleanup = [t for t in tasks.values() if t.action == "cleanup_cloud_sandbox"]
        self.assertEqual(len(cleanup), 1)
        self.assertEqual((cleanup[0].status, cleanup[0].payload, cleanup[0].user_id),
                         ("queued", {"cloud_sandbox_id": box["id"]}, self.alice))

        # gone from the user's views; charges stay readable; a second delete is a 404
        self.assertEqual((await self.call("GET", f"{SANDBOXES}/{box['id']}",
                                          token=self.user_token)).status, 404)
        self.assertEqual([s["id"] for s in (await self.call(
            "GET", SANDBOXES, token=self.user_token)).json()], [other["id"]])
        shown = (await self.call("GET", f"{SANDBOXES}/{box['id']}/charges",
                                 token=self.user_token)).json()
        self.assertEqual([(c["kind"], c["cost"], c["quantity"]) for c in shown],
                         [("storage", "0.1", "0.5")])
        again = await self.call("DELETE", f"{SANDBOXES}/{box['id']}", token=self.user_token)
        self.assertEqual(again.status, 404)
        await self.verify_ledger()


class AvailableHostsTests(SandboxCase):
    async def test_enabled_hosts_by_name_with_online_prices_and_range(self) -> None:
        await self.start()
        zeta, _ = await self.add_host(name="zeta", online=False, runtime_price_hour="0.5",
                                      storage_price_gb_hour="0.000000001")
        alpha, alpha_device = await self.add_host(
            name="alpha", policy='{"max_cpu_cores": 8, "allowed_images": ["node:22"]}',
            capacity={"cpu_cores": 4, "memory_mb": 16384, "disk_gb": 50},
            cpu_price_hour="0.12", runtime_multiplier="1.5")
        await self.add_host(name="beta", enabled=False)
        response = await self.call("GET", "/api/user/advanced-chat/sandbox-hosts/available",
                                   token=self.user_token)
        self.assertEqual(response.status, 200, response)
        hosts = response.json()
        self.assertEqual([(h["id"], h["online"]) for h in hosts], [(alpha, True), (zeta, False)])
        first = hosts[0]
        self.assertEqual(orjson.loads(first["security_policy"]),
                         {"max_cpu_cores": 8, "allowed_images": ["node:22"]})
        self.assertEqual((first["cpu_price_hour"], first["runtime_price_hour"],
                          first["runtime_multiplier"]), ("0.12", "0", "1.5"))
        self.assertEqual(first["available_range"], {
            "cpu_cores": {"min": 0, "min_exclusive": True, "max": 4},
            "memory_mb": {"min": 128, "max": 16384},
            "disk_gb": {"min": 1, "max": 50}, "images": ["node:22"]})
        self.assertNotIn("connector_device_id", first)
        self.assertEqual(hosts[1]["storage_price_gb_hour"], "0.000000001")
        self.assertEqual(orjson.loads(hosts[1]["security_policy"])["runtime"], "docker")
        # [P-41]: the host is offline the moment its link is released
        await self.set_online(alpha_device, False)
        again = await self.call("GET", "/api/user/advanced-chat/sandbox-hosts/available",
                                token=self.user_token)
        self.assertEqual([h["online"] for h in again.json()], [False, False])
        self.assertEqual((await self.call(
            "GET", "/api/user/advanced-chat/sandbox-hosts/available")).status, 401)
