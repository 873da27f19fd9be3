"""Image generations answered with a task id become tasks (contract §13.5, §13.6)."""

from __future__ import annotations

from gateway.store import schema
from tests.gateway.tasks.task_case import TaskTestCase, nanos


class ImageTaskTests(TaskTestCase):
    async def provision_images(self) -> None:
        await self.provision_video(channel_type="compat")
        await self.catalog.set(schema.models, self.model_id, quota_type=1,
                               output_price_nanos=nanos("0.04"), video_billing_config=None)

    async def test_task_answer_becomes_a_task_billed_per_image(self) -> None:
        await self.provision_images()
        created = await self.submit({"model": "video-1", "prompt": "a fox", "n": 2},
                                    path="/v1/images/generations")
        assert created.status == 200, created
        task_id = created.json()["data"][0]["task_id"]
        assert created.json()["data"][0]["status"] == "submitted"
        assert "up-1" not in created.body.decode()
        assert await self.balance_nanos(self.user_id) == self.start_balance - nanos("0.08")
        pending = (await self.get(f"/v1/images/generations/{task_id}")).json()
        assert pending["status"] == "pending"
        assert "url" not in pending
        await self.drive(40)
        assert self.up.polls[0].path == "/v1/tasks/up-1"
        done = (await self.get(f"/v1/images/generations/{task_id}")).json()
        assert done["status"] == "completed"
        assert done["url"] == "https://cdn.example/up-1.png"
        assert done["result"]["images"] == [{"url": ["https://cdn.example/up-1.png"]}]
        # one charge row for the task, no second settlement of the relay call
        rows = await self.ledger_rows()
        assert [(r["kind"], r["ref"]) for r in rows] == [("charge", task_id)]
        await self.assert_reconciled()

    async def test_failed_image_task_is_refunded(self) -> None:
        await self.provision_images()
        self.up.next_scripts = [((0, "submitted"), (5, "failed"))]
        created = await self.submit({"model": "video-1", "prompt": "a fox"},
                                    path="/v1/images/generations")
        task_id = created.json()["data"][0]["task_id"]
        await self.drive(10)
        done = (await self.get(f"/v1/images/generations/{task_id}")).json()
        assert done["status"] == "failed"
        assert await self.balance_nanos(self.user_id) == self.start_balance
        await self.assert_reconciled()
