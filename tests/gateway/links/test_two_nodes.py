"""Agent links across two nodes on one PostgreSQL and one redis-server (DESIGN.md, Scale-out):
the device links to node A, everything else happens on node B."""

from __future__ import annotations

import time
from typing import Any

from gateway.links import ids
from gateway.store import connector_tasks as task_store
from tests.gateway.links.link_case import DEVICES, LinkTestCase
from tests.support.redis_nodes import SharedRedisNodes


class TwoNodeLinkTests(SharedRedisNodes, LinkTestCase):
    backend = "postgresql"

    async def start_node_b(self) -> None:
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        self.base_b = self.serve(node)
        await node.state.settled()
        await self.app.state.settled()

    async def test_task_created_on_b_reaches_the_link_on_a_and_the_result_is_seen_on_b(
            self) -> None:
        await self.start_node_b()
        login, token, device = await self.user_with_device()
        client = await self.link(token)  # on node A
        shown_on_b = (await self.call_b("GET", f"{DEVICES}/{device['id']}", login)).json()
        assert shown_on_b["online"] is True

        started = time.monotonic()
        task = await self.task_for(device, await self.user_id(login), app=self.node_b)
        waiting_on_b = self.links_of(self.node_b).tasks.wait(task)
        frame = await client.next_of("task")
        assert frame["task"]["id"] == task.id
        client.send({"type": "task_result", "task_id": task.id, "success": True,
                     "result": "done"})
        finished = await waiting_on_b
        elapsed = time.monotonic() - started
        assert finished is not None and finished.status == "completed"
        assert elapsed < 1.0, elapsed  # the bus, not the 1 s re-check (the clock is frozen)
        on_b = (await self.call_b("GET", f"/api/user/advanced-chat/connector-tasks/{task.id}",
                                  login)).json()
        on_a = (await self.call("GET", f"/api/user/advanced-chat/connector-tasks/{task.id}",
                                token=login)).json()
        assert on_a["result"] == on_b["result"] == "done"

    async def test_cancel_and_rotation_on_b_reach_the_link_on_a(self) -> None:
        await self.start_node_b()
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        task = await self.task_for(device, await self.user_id(login), app=self.node_b)
        await client.next_of("task")
        cancelled = await self.call_b(
            "POST", f"{DEVICES}/{device['id']}/tasks/{task.id}/cancel", login)
        assert cancelled.json() == {"ok": True}
        assert (await client.next_of("task_cancel"))["task_id"] == task.id
        await self.call_b("POST", f"{DEVICES}/{device['id']}/token", login)
        assert await client.close_code() == 4401

    async def test_a_link_on_b_supersedes_the_link_on_a(self) -> None:
        await self.start_node_b()
        login, token, device = await self.user_with_device()
        on_a = await self.link(token)
        on_b = await self.link(token, base=self.base_b)
        assert await on_a.close_code() == 4409
        task = await self.task_for(device, await self.user_id(login))  # created on A
        assert (await on_b.next_of("task"))["task"]["id"] == task.id
        shown = (await self.call("GET", f"{DEVICES}/{device['id']}", token=login)).json()
        assert shown["online"] is True

    async def test_the_one_second_recheck_delivers_what_the_bus_missed(self) -> None:
        await self.start_node_b()
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        now = self.links_of().hub.now()
        # written straight to the database: nobody publishes a wake-up
        task = await self.node_b.db.transaction(
            task_store.create, task_id=ids.new_id(ids.TASK), user_id=await self.user_id(login),
            device_id=device["id"], action="read_file", payload={"path": "a.txt"},
            workspace_path="/w", status=task_store.QUEUED, now=now)
        self.clock.advance(1)
        assert (await client.next_of("task"))["task"]["id"] == task.id

    async def call_b(self, method: str, path: str, login: str) -> Any:
        base, self.base = self.base, self.base_b
        try:
            return await self.call(method, path, token=login)
        finally:
            self.base = base
