"""artjob routes (gateway contract §14): create, the listed actions only, and the flat query."""

from __future__ import annotations

from gateway.store import schema
from tests.gateway.tasks.task_case import TaskTestCase, nanos


class ArtjobTaskTests(TaskTestCase):
    async def provision_artjob(self) -> None:
        await self.provision_video(channel_type="artjob")
        # priced per call: 0.05 per generation
        await self.catalog.set(schema.models, self.model_id, quota_type=1,
                               output_price_nanos=nanos("0.05"), video_billing_config=None)

    async def test_imagine_then_query_flat_and_wrapped(self) -> None:
        await self.provision_artjob()
        created = await self.submit({"model": "video-1", "prompt": "a lighthouse"},
                                    path="/v1/artjob/generations/imagine")
        assert created.status == 200, created
        task_id = created.json()["data"][0]["task_id"]
        assert self.up.submits[0].path == "/v1/artjob/generations/imagine"
        assert self.up.submits[0].body["model"] == "up-video"
        assert await self.balance_nanos(self.user_id) == self.start_balance - nanos("0.05")
        await self.drive(40)
        assert self.up.polls[0].path == "/v1/artjob/up-1"
        flat = (await self.get(f"/v1/artjob/{task_id}")).json()
        assert flat["status"] == "completed"
        assert flat["image_urls"] == ["https://cdn.example/up-1.png"]
        assert flat["grid_image_url"] == "https://cdn.example/up-1.png"
        assert flat["buttons"] == [{"label": "U1"}]
        assert flat["cost"] == "0.05"
        wrapped = (await self.get(f"/v1/tasks/{task_id}")).json()
        assert wrapped["data"]["status"] == "completed"
        await self.assert_reconciled()

    async def test_listed_actions_only(self) -> None:
        await self.provision_artjob()
        for action in ("upscale", "remix", "high-variation"):
            answer = await self.submit({"model": "video-1", "task_id": "x", "index": 1},
                                       path=f"/v1/artjob/generations/{action}")
            assert answer.status == 200, (action, answer)
        for action in ("explode", "imagine/extra"):
            answer = await self.submit({"model": "video-1"},
                                       path=f"/v1/artjob/generations/{action}")
            assert answer.status == 404, (action, answer)
        assert len(self.up.submits) == 3

    async def test_default_model_and_channel_type_check(self) -> None:
        await self.provision_video()  # a compat-video channel cannot serve artjob
        answer = await self.submit({"prompt": "x"}, path="/v1/artjob/generations")
        # no "model": the route's default model "artjob" is not in the catalog
        assert answer.status == 503, answer
        answer = await self.submit({"model": "video-1", "prompt": "x"},
                                   path="/v1/artjob/generations")
        assert answer.status == 400
        assert answer.json()["error"]["type"] == "unsupported_upstream"
        assert self.up.requests == []
