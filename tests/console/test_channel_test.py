"""``POST /api/channels/:id/test`` (web console contract §6) against a real loopback upstream.

The test call is the protocol family's cheapest request with the channel's key; its outcome is
our own short text (never the upstream body or key), the channel's health fields record it, and
nothing is billed or logged.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from gateway.store import schema
from tests.console.admin_case import AdminCase
from tests.support.catalog_fixtures import CatalogBuilder
from tests.support.upstream import FakeUpstream

UPSTREAM_KEY = "sk-upstream-secret-123"


class ChannelTestRouteTests(AdminCase):
    async def prepare(self, *, type: str = "compat") -> None:
        await self.admin()
        await self.ctx.live_settings.save({"ssrf_allow_private_networks": "true"},
                                          self.ctx.now())
        self.up = FakeUpstream.start()
        self.addCleanup(self.up.stop)
        self.up.api_key = UPSTREAM_KEY
        self.build = CatalogBuilder(self.ctx)
        self.channel = await self.build.channel(None, "up-a", type=type,
                                                base_url=self.up.base_url, api_key=UPSTREAM_KEY)

    async def add_model(self, name: str, upstream: str = "", enabled: bool = True) -> int:
        model_id = await self.build.model(name)
        config = await self.build.config(self.channel, model_id, upstream=upstream,
                                         enabled=enabled)
        await self.build.announce()
        return config

    async def health(self) -> dict[str, Any]:
        response = await self.api("GET", f"/api/channels/{self.channel}")
        return dict(response.json())

    async def counts(self) -> tuple[int, int, int]:
        def read(conn: Any) -> tuple[int, int, int]:
            logs = conn.execute(select(func.count()).select_from(schema.usage_logs)).scalar()
            ledger = conn.execute(select(func.count()).select_from(schema.ledger)).scalar()
            balance = conn.execute(select(func.sum(schema.users.c.balance_nanos))).scalar()
            return int(logs), int(ledger), int(balance or 0)

        return await self.ctx.db.transaction(read)

    async def test_chat_family_sends_one_token_completion_with_channel_key(self) -> None:
        await self.prepare()
        await self.add_model("fast-small", upstream="gpt-fake")
        before = await self.counts()
        assert (await self.health())["last_health_status"] == "pending"
        response = await self.api("POST", f"/api/channels/{self.channel}/test")
        assert response.status == 200, response
        outcome = response.json()
        assert outcome["success"] is True and outcome["status_code"] == 200
        assert outcome["message"] == "OK" and isinstance(outcome["latency_ms"], int)
        [sent] = self.up.requests
        assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
        assert sent.body["model"] == "gpt-fake" and sent.body["max_tokens"] == 1
        assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
        channel = await self.health()
        assert channel["last_health_status"] == "up"
        assert channel["last_health_checked_at"] is not None
        assert await self.counts() == before

    async def test_upstream_failure_is_reported_without_its_body(self) -> None:
        await self.prepare()
        await self.add_model("broken", upstream="gpt-x+fail-500")
        response = await self.api("POST", f"/api/channels/{self.channel}/test")
        outcome = response.json()
        assert response.status == 200 and outcome["success"] is False
        assert outcome["status_code"] == 500
        assert "fake upstream failure" not in outcome["message"]
        assert UPSTREAM_KEY not in response.body.decode()
        assert (await self.health())["last_health_status"] == "down"

    async def test_wrong_key_is_a_failed_test(self) -> None:
        await self.prepare()
        await self.add_model("fast-small")
        self.up.api_key = "sk-another"
        outcome = (await self.api("POST", f"/api/channels/{self.channel}/test")).json()
        assert outcome["success"] is False and outcome["status_code"] == 401
        assert "Incorrect API key" not in outcome["message"]

    async def test_named_model_picks_its_config(self) -> None:
        await self.prepare()
        await self.add_model("first", upstream="gpt-fake")
        await self.add_model("second", upstream="gpt-fake-mini")
        response = await self.api("POST", f"/api/channels/{self.channel}/test",
                                  {"model": "second"})
        assert response.json()["success"] is True
        assert self.up.requests[-1].body["model"] == "gpt-fake-mini"
        missing = await self.api("POST", f"/api/channels/{self.channel}/test",
                                 {"model": "nope"})
        assert missing.status == 400
        assert missing.json()["error"] == "Channel has no models to test"

    async def test_task_family_lists_models(self) -> None:
        await self.prepare(type="artjob")
        await self.add_model("art")
        outcome = (await self.api("POST", f"/api/channels/{self.channel}/test")).json()
        assert outcome["success"] is True
        assert [(r.method, r.path) for r in self.up.requests] == [("GET", "/v1/models")]

    async def test_unreachable_upstream_has_no_status(self) -> None:
        await self.prepare()
        await self.add_model("fast-small")
        await self.up.stop()
        outcome = (await self.api("POST", f"/api/channels/{self.channel}/test")).json()
        assert outcome["success"] is False and outcome["status_code"] is None
        assert outcome["message"].startswith("Request failed")
        assert (await self.health())["last_health_status"] == "down"

    async def test_refusals(self) -> None:
        await self.prepare()
        await self.add_model("off", enabled=False)
        tables = ("channels", "usage_logs")
        await self.assert_refused("POST", f"/api/channels/{self.channel}/test", None, 400,
                                  tables, message="Channel has no models to test")
        await self.assert_refused("POST", "/api/channels/999/test", None, 404, tables,
                                  message="Channel not found")
        await self.assert_refused("POST", f"/api/channels/{self.channel}/test",
                                  {"model": 5}, 400, tables)
        user = await self.register("plain")
        response = await self.call("POST", f"/api/channels/{self.channel}/test",
                                   token=user["token"])
        assert response.status == 403
        assert self.up.requests == []
