"""Task settings (gateway contract §0, §13.5): the artjob / clipgen2 upstream path prefixes, the
clipgen2 default model and the task lifetime are read from ``/api/settings`` at use time."""

from __future__ import annotations

from typing import Any

from gateway.store import schema
from gateway.store.settings_rows import read_settings
from tests.gateway.tasks.task_case import VIDEO_BODY, TaskTestCase, nanos

AVATAR = "/v1/clipgen2/private-avatar"


class TaskSettingsTests(TaskTestCase):
    async def put_settings(self, body: dict[str, Any]) -> Any:
        return await self.call("PUT", "/api/settings", body, token=self.admin_token)

    async def provision_artjob(self) -> None:
        await self.provision_video(channel_type="artjob")
        await self.catalog.set(schema.models, self.model_id, quota_type=1,
                               output_price_nanos=nanos("0.05"), video_billing_config=None)

    async def test_custom_artjob_prefix_is_used_for_create_and_poll(self) -> None:
        await self.provision_artjob()
        answer = await self.put_settings({"artjob_upstream_path_prefix": "/mj/api/"})
        assert answer.status == 200, answer
        assert answer.json()["artjob_upstream_path_prefix"] == "/mj/api"
        self.up.status_prefixes.append("/mj/api/")
        created = await self.submit({"model": "video-1", "prompt": "a lighthouse"},
                                    path="/v1/artjob/generations/upscale")
        assert created.status == 200, created
        task_id = created.json()["data"][0]["task_id"]
        assert self.up.submits[0].path == "/mj/api/generations/upscale"
        assert (await self.task_row(task_id))["status_path"] == "/mj/api/up-1"
        await self.drive(40)
        assert self.up.polls[0].path == "/mj/api/up-1"
        got = (await self.get(f"/v1/artjob/{task_id}")).json()
        assert got["status"] == "completed"
        await self.assert_reconciled()

    async def test_default_prefixes_mirror_the_client_path(self) -> None:
        await self.provision_video()
        created = await self.submit({**VIDEO_BODY}, path=AVATAR)
        assert created.status == 200, created
        assert self.up.submits[0].path == AVATAR

    async def test_custom_clipgen2_prefix_and_default_model(self) -> None:
        await self.provision_video()
        body = {k: v for k, v in VIDEO_BODY.items() if k != "model"}
        # the neutral default model is not in this catalog: no upstream call
        refused = await self.submit(body, path=AVATAR)
        assert refused.status == 503, refused
        assert self.up.requests == []
        answer = await self.put_settings({"clipgen2_upstream_path_prefix": "/vendor/avatar",
                                          "clipgen2_default_model": "video-1"})
        assert answer.status == 200, answer
        created = await self.submit(body, path=AVATAR)
        assert created.status == 200, created
        task_id = created.json()["data"][0]["task_id"]
        submitted = self.up.submits[0]
        assert submitted.path == "/vendor/avatar/private-avatar"
        assert submitted.body["model"] == "up-video"
        rows = await self.all_tasks()
        assert [r["model_name"] for r in rows] == ["video-1"]
        assert rows[0]["status_path"] == "/v1/tasks/up-1"
        assert task_id == rows[0]["id"]
        # a body naming its own model still wins over the default
        again = await self.submit({**VIDEO_BODY, "model": "nope"}, path=AVATAR)
        assert again.status != 200
        assert len(self.up.submits) == 1
        await self.assert_reconciled()

    async def test_bad_values_are_refused_and_change_nothing(self) -> None:
        await self.provision_video()
        before = await self.ctx.db.transaction(read_settings)
        bad = [
            {"artjob_upstream_path_prefix": "v1/artjob"},
            {"artjob_upstream_path_prefix": "/v1/../admin"},
            {"artjob_upstream_path_prefix": "/v1/artjob?x=1"},
            {"clipgen2_upstream_path_prefix": "/v1/clip#frag"},
            {"clipgen2_upstream_path_prefix": "//evil.example/x"},
            {"clipgen2_upstream_path_prefix": "/"},
            {"clipgen2_upstream_path_prefix": "/a b"},
            {"clipgen2_default_model": ""},
            {"clipgen2_default_model": "   "},
            {"clipgen2_default_model": "two words"},
            {"task_ttl_seconds": "59"},
            {"task_ttl_seconds": "2592001"},
            {"task_ttl_seconds": "1.5"},
            # one good key next to a bad one: the whole body is refused
            {"clipgen2_default_model": "video-1", "artjob_upstream_path_prefix": "nope"},
        ]
        for body in bad:
            answer = await self.put_settings(body)
            assert answer.status == 400, (body, answer)
            field = answer.json()["field"]
            assert field == [*body][-1] and field in answer.json()["error"], (body, answer.json())
        assert await self.ctx.db.transaction(read_settings) == before
        settings = self.ctx.settings
        assert settings.text("artjob_upstream_path_prefix") == "/v1/artjob"
        assert settings.text("clipgen2_upstream_path_prefix") == "/v1/clipgen2"
        assert settings.text("clipgen2_default_model") == "clipgen2"
        assert settings.text("task_ttl_seconds") == "86400"

    async def test_task_ttl_setting_is_read_at_submission(self) -> None:
        await self.provision_video()
        assert self.poller.task_ttl == 24 * 3600.0  # nothing stored: the constructor value
        answer = await self.put_settings({"task_ttl_seconds": 60})
        assert answer.status == 200, answer
        assert self.poller.task_ttl == 60
        self.up.next_scripts = [((0, "pending"), (5, "running"))]
        task_id = (await self.submit()).json()["id"]
        row = await self.task_row(task_id)
        assert (row["expires_at"] - row["created_at"]).total_seconds() == 60
        await self.drive(55)
        assert (await self.task_row(task_id))["status"] == "processing"
        await self.drive(10)
        row = await self.task_row(task_id)
        assert row["status"] == "expired"
        assert row["billing_state"] == "refunded"
        assert await self.balance_nanos(self.user_id) == self.start_balance
        await self.assert_reconciled()
