"""The compatible task family: create envelope, wrapped queries, remix and clipgen2 routes."""

from __future__ import annotations

from tests.gateway.tasks.task_case import VIDEO_BODY, TaskTestCase


class CompatTaskTests(TaskTestCase):
    async def test_create_answers_the_envelope_and_queries_are_wrapped(self) -> None:
        await self.provision_video()
        created = await self.submit(path="/v1/videos/generations")
        assert created.status == 200, created
        envelope = created.json()
        assert envelope["code"] == 200
        [item] = envelope["data"]
        assert item["status"] == "submitted"
        task_id = item["task_id"]
        assert task_id.startswith("vtask_")
        assert self.up.submits[0].path == "/v1/videos/generations"
        first = (await self.get(f"/v1/tasks/{task_id}")).json()
        assert first["code"] == 200
        assert first["data"]["status"] == "pending"
        assert first["data"]["task_id"] == task_id
        assert first["data"]["upstream_id"] == "up-1"
        assert first["data"]["progress"] == 0
        assert first["data"]["cost"] == "0.3"
        assert first["data"]["credits_cost"] == "3"
        await self.drive(40)
        assert self.up.polls[0].path == "/v1/tasks/up-1"
        done = (await self.get(f"/v1/videos/generations/{task_id}")).json()["data"]
        assert done["status"] == "completed"
        assert done["progress"] == 100
        assert done["result"] == {"videos": [{"url": "https://cdn.example/up-1.mp4"}]}
        assert "completed" in done and done["actual_time"] >= 30
        await self.assert_reconciled()

    async def test_failed_compat_task_is_refunded_and_reports_the_error(self) -> None:
        await self.provision_video()
        self.up.next_scripts = [((0, "queued"), (5, "error"))]
        task_id = (await self.submit(path="/v1/videos/generations")).json()["data"][0][
            "task_id"]
        await self.drive(10)
        data = (await self.get(f"/v1/tasks/{task_id}")).json()["data"]
        assert data["status"] == "failed"
        assert data["error"] == {"message": "generation failed"}
        assert await self.balance_nanos(self.user_id) == self.start_balance
        await self.assert_reconciled()

    async def test_unknown_or_foreign_task_is_task_not_found(self) -> None:
        await self.provision_video()
        task_id = (await self.submit(path="/v1/videos/generations")).json()["data"][0][
            "task_id"]
        bob = await self.register("bob")
        for path in (f"/v1/tasks/{task_id}", f"/v1/videos/generations/{task_id}"):
            answer = await self.get(path, key=bob["token"])
            assert answer.status == 404
            assert answer.json()["error"]["message"] == "Task not found"

    async def test_remix_sends_the_upstream_id_of_our_task(self) -> None:
        await self.provision_video()
        parent = (await self.submit(path="/v1/videos/generations")).json()["data"][0][
            "task_id"]
        remix = await self.submit({**VIDEO_BODY, "prompt": "again"},
                                  path=f"/v1/videos/{parent}/remix")
        assert remix.status == 200, remix
        sent = self.up.submits[1]
        assert sent.path == "/v1/videos/up-1/remix"
        assert sent.body["parent_task_id"] == "up-1"
        assert parent not in str(sent.body)
        await self.assert_reconciled()

    async def test_clipgen2_private_avatar_is_a_video_task(self) -> None:
        await self.provision_video()
        created = await self.submit(path="/v1/clipgen2/private-avatar")
        assert created.status == 200, created
        assert self.up.submits[0].path == "/v1/clipgen2/private-avatar"
        assert created.json()["data"][0]["status"] == "submitted"

    async def test_unknown_task_paths_are_404_before_authentication(self) -> None:
        for method, path in (("POST", "/v1/videos/a/b/remix"), ("GET", "/v1/tasks/a/b"),
                             ("DELETE", "/v1/tasks/x"), ("GET", "/v1/tasks/")):
            answer = await self.call(method, path)
            assert answer.status == 404, (method, path, answer)
