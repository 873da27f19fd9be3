from __future__ import annotations

from tests.gateway.links.link_case import LinkTestCase


class Smoke(LinkTestCase):
    async def test_roundtrip(self) -> None:
        login, token, device = await self.user_with_device()
        client = await self.link(token)
        task = await self.task_for(device, user_id=await self.user_id(login))
        frame = await client.next_of("task")
        assert frame["task"]["id"] == task.id
        client.send({"type": "task_result", "task_id": task.id, "success": True, "result": "hi"})
        ack = await client.next_of("task_result_ack")
        assert ack == {"type": "task_result_ack", "task_id": task.id, "ok": True}
        row = await self.task(task.id)
        assert row.status == "completed", row
