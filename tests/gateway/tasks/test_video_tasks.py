"""The video task family end to end: submit, poll in the background, bill, refund once."""

from __future__ import annotations

from tests.gateway.tasks.task_case import VIDEO_BODY, TaskTestCase, nanos


class VideoTaskTests(TaskTestCase):
    async def test_success_is_charged_once_and_completes_without_client_polls(self) -> None:
        await self.provision_video()
        created = await self.submit()
        assert created.status == 200, created
        record = created.json()
        assert record["id"].startswith("vtask_") and len(record["id"]) == 38
        assert record["status"] == "queued"
        assert record["cost"] == "0.3"
        assert record["upstream_id"] == "up-1"
        assert self.up.submits[0].path == "/v1/video/generations"
        assert self.up.submits[0].body["model"] == "up-video"
        assert self.up.submits[0].headers["authorization"] == "Bearer up-key"
        assert await self.balance_nanos(self.user_id) == self.start_balance - nanos("0.3")

        await self.drive(40)
        row = await self.task_row(record["id"])
        assert row["status"] == "succeeded"
        assert row["billing_state"] == "settled"
        assert self.up.polls[0].path == "/v1/video/generations/up-1"
        got = await self.get(f"/v1/video/generations/{record['id']}")
        assert got.status == 200
        body = got.json()
        assert body["status"] == "succeeded"
        assert body["id"] == record["id"]
        assert body["data"] == [{"url": "https://cdn.example/up-1.mp4"}]
        assert body["cost"] == "0.3"
        # every alias answers the same record
        for prefix in ("/v1/videos/image2video", "/v1/video/tasks", "/v1/videos/tasks"):
            alias = await self.get(f"{prefix}/{record['id']}")
            assert alias.json()["status"] == "succeeded"
        assert await self.balance_nanos(self.user_id) == self.start_balance - nanos("0.3")
        await self.assert_reconciled()

    async def test_failure_is_refunded_once(self) -> None:
        await self.provision_video()
        self.up.next_scripts = [((0, "pending"), (10, "failed"))]
        created = await self.submit()
        assert created.status == 200, created
        task_id = created.json()["id"]
        await self.drive(20)
        row = await self.task_row(task_id)
        assert row["status"] == "failed"
        assert row["billing_state"] == "refunded"
        assert await self.balance_nanos(self.user_id) == self.start_balance
        # the terminal task is not polled again, however long we wait
        polls = len(self.up.polls)
        await self.drive(30)
        assert len(self.up.polls) == polls
        got = (await self.get(f"/v1/videos/tasks/{task_id}")).json()
        assert got["status"] == "failed"
        assert got["cost"] == "0"
        rows = await self.ledger_rows()
        assert [r["kind"] for r in rows] == ["charge", "task_refund"]
        await self.assert_reconciled()

    async def test_task_that_never_finishes_expires_and_is_refunded(self) -> None:
        await self.provision_video()
        self.poller.task_ttl = 60
        self.up.next_scripts = [((0, "pending"), (5, "running"))]
        task_id = (await self.submit()).json()["id"]
        await self.drive(55)
        assert (await self.task_row(task_id))["status"] == "processing"
        await self.drive(10)
        row = await self.task_row(task_id)
        assert row["status"] == "expired"
        assert row["billing_state"] == "refunded"
        assert await self.balance_nanos(self.user_id) == self.start_balance
        got = (await self.get(f"/v1/video/tasks/{task_id}")).json()
        assert got["status"] == "failed"
        assert "expired" in got["error"]["message"]
        await self.assert_reconciled()

    async def test_upstream_5xx_at_submit_costs_nothing(self) -> None:
        await self.provision_video()
        self.up.submit_failures = 1
        refused = await self.submit()
        assert refused.status == 502, refused
        assert refused.json()["error"]["message"] == "Upstream request failed"
        assert "exploded" not in refused.body.decode()
        assert len(self.up.submits) == 1  # never retried elsewhere
        assert await self.all_tasks() == []
        assert await self.ledger_rows() == []
        assert await self.balance_nanos(self.user_id) == self.start_balance
        # the held money is free again: a later submit of the full balance's worth works
        ok = await self.submit()
        assert ok.status == 200
        await self.assert_reconciled()

    async def test_insufficient_balance_is_402_before_any_upstream_call(self) -> None:
        await self.provision_video(balance="0.2")
        refused = await self.submit()
        assert refused.status == 402, refused
        assert self.up.requests == []
        assert await self.all_tasks() == []

    async def test_billing_tier_not_allowed_is_400_before_any_upstream_call(self) -> None:
        await self.provision_video()
        cases = [
            ({**VIDEO_BODY, "resolution": "4k"}, 'Video resolution "4k" is not allowed'),
            ({**VIDEO_BODY, "duration": 7}, "Video duration 7 seconds is not allowed"),
            ({k: v for k, v in VIDEO_BODY.items() if k != "duration"},
             "Video duration is required"),
        ]
        for body, message in cases:
            refused = await self.submit(body)
            assert refused.status == 400, refused
            assert refused.json()["error"]["message"] == message
            assert refused.json()["error"]["type"] == "invalid_request"
        assert self.up.requests == []
        assert await self.balance_nanos(self.user_id) == self.start_balance
        # per-second pricing at 1080p: 0.1 x 8 s, two videos
        ok = await self.submit({**VIDEO_BODY, "resolution": "1080P", "duration": "8s", "n": 2})
        assert ok.status == 200, ok
        assert ok.json()["cost"] == "1.6"

    async def test_unconfigured_video_billing_is_400(self) -> None:
        await self.provision_video()
        from gateway.store import schema
        await self.catalog.set(schema.models, self.model_id, video_billing_config=None)
        refused = await self.submit()
        assert refused.status == 400
        assert refused.json()["error"]["message"] == "Video billing resolutions are not configured"
        assert self.up.requests == []

    async def test_another_users_task_is_404_like_a_missing_one(self) -> None:
        await self.provision_video()
        task_id = (await self.submit()).json()["id"]
        bob = await self.register("bob")
        theirs = await self.get(f"/v1/video/generations/{task_id}", key=bob["token"])
        missing = await self.get("/v1/video/generations/vtask_" + "0" * 32)
        for answer in (theirs, missing):
            assert answer.status == 404, answer
            assert answer.json()["error"]["message"] == "Video task not found"
        mine = await self.get(f"/v1/video/generations/{task_id}", key=self.user_token)
        assert mine.status == 200  # the owner's login token sees it too
        unauthenticated = await self.call("GET", f"/v1/video/generations/{task_id}")
        assert unauthenticated.status == 401

    async def test_non_video_channel_is_refused(self) -> None:
        await self.provision_video(channel_type="compat")
        refused = await self.submit()
        assert refused.status == 400
        assert refused.json()["error"]["message"] == (
            "Video generation is only supported for video upstream channels")
        assert self.up.requests == []

    async def test_imgvideo_channel_maps_the_body_and_finds_the_real_task_id(self) -> None:
        await self.provision_video(channel_type="imgvideo")
        created = await self.submit({
            "model": "video-1", "prompt": "waves", "image_url": "https://img.example/a.png",
            "size": "16:9", "seconds": 5, "n": 1},
            path="/v1/videos/image2video")
        assert created.status == 200, created
        sent = self.up.submits[0]
        assert sent.path == "/v1/videos/image2video"
        assert sent.body == {"model_name": "up-video", "prompt": "waves",
                             "image": "https://img.example/a.png", "aspect_ratio": "16:9",
                             "duration": "5", "num_videos": 1}
        record = created.json()
        assert record["upstream_id"] == "up-1"  # data.task_id, not the top-level request_id
        await self.drive(40)
        assert self.up.polls[0].path == "/v1/videos/image2video/up-1"
        assert (await self.task_row(record["id"]))["status"] == "succeeded"
        await self.assert_reconciled()

    async def test_get_answers_from_the_store_and_nudges_the_poller(self) -> None:
        await self.provision_video()
        self.up.next_scripts = [((0, "pending"), (1, "succeeded"))]
        task_id = (await self.submit()).json()["id"]
        self.clock.advance(2)  # upstream done; the next scheduled poll is 3 s away
        got = await self.get(f"/v1/video/generations/{task_id}")
        assert got.json()["status"] == "queued"  # stored state, at once
        await self.poller.idle()
        assert (await self.task_row(task_id))["status"] == "succeeded"
        await self.assert_reconciled()

    async def test_refunded_money_is_spendable_again_at_once(self) -> None:
        await self.provision_video(balance="0.3")
        self.up.next_scripts = [((0, "pending"), (5, "failed"))]
        assert (await self.submit()).status == 200
        assert (await self.submit()).status == 402  # the whole balance is charged
        await self.drive(10)
        assert await self.key_spent() == 0  # the key's quota counter was given back too
        again = await self.submit()
        assert again.status == 200, again
        assert await self.key_spent() == nanos("0.3")
        assert await self.balance_nanos(self.user_id) == 0
        await self.assert_reconciled()

    async def key_spent(self) -> int:
        from sqlalchemy import select

        from gateway.store import schema
        return await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.api_keys.c.spent_nanos).where(schema.api_keys.c.id == self.key_id)
        ).scalar_one())

    async def test_failed_polls_back_off_and_stay_internal(self) -> None:
        await self.provision_video()
        self.up.next_scripts = [((0, "pending"), (5, "succeeded"))]
        task_id = (await self.submit()).json()["id"]
        self.up.poll_failures = 3
        await self.drive(5)  # first poll fails: next try 10 s later, then 20 s, then 40 s
        assert len(self.up.polls) == 1
        got = await self.get(f"/v1/video/generations/{task_id}")
        assert got.status == 200 and got.json()["status"] == "queued"  # last known state
        await self.drive(5)
        assert len(self.up.polls) == 1  # backing off, not polling every interval
        await self.drive(75)
        row = await self.task_row(task_id)
        assert len(self.up.polls) == 4
        assert row["status"] == "succeeded"
        assert row["poll_errors"] == 0
        await self.assert_reconciled()
