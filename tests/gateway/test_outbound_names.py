"""Host names that resolve to loopback, on the gateway's own outbound paths (issue 15 finding 1).

The channel ``base_url`` names ``relay.evil.example``; ``ScriptedNames`` makes it resolve to
127.0.0.1, where the fake upstream listens.  The URL text passes the SSRF policy (it is a
name), so only the connect-time check can stop the call: with
``ssrf_allow_private_networks=false`` nothing may reach the listener -- not the relay, not the
task poller -- and the channel key is never sent.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor

from gateway.store import schema
from tests.gateway.gateway_case import GatewayTestCase
from tests.gateway.tasks.task_case import TaskTestCase
from tests.support.names import ScriptedNames

CHAT = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}
NAME = "relay.evil.example"


async def set_private_allowed(case: Any, allowed: bool) -> None:
    await case.ctx.live_settings.save(
        {"ssrf_allow_private_networks": "true" if allowed else "false"}, case.ctx.now())


class RelayNameTests(GatewayTestCase):
    async def named_channel(self, port: int) -> None:
        self.names = ScriptedNames({NAME: [["127.0.0.1"]]}).install(self, reactor)
        await self.catalog.set(schema.channels, self.channel_id,
                               base_url=f"http://{NAME}:{port}/v1")
        await self.catalog.announce()

    async def chat(self) -> Any:
        return await self.call("POST", "/v1/chat/completions", CHAT,
                               headers={"Authorization": f"Bearer {self.api_key}"})

    async def test_a_name_resolving_to_loopback_is_refused_at_connect(self) -> None:
        await self.provision()
        await self.named_channel(int(self.fake.base_url.rsplit(":", 1)[1]))
        await set_private_allowed(self, False)
        blocked = await self.chat()
        assert blocked.status == 502, blocked
        assert blocked.json()["error"]["message"] == "Upstream URL blocked by SSRF protection"
        assert self.fake.connections_made == 0 and self.fake.request_count == 0
        assert NAME in self.names.asked
        # the policy allows it: the same name now connects
        await set_private_allowed(self, True)
        allowed = await self.chat()
        assert allowed.status == 200, allowed
        assert self.fake.request_count == 1

    async def test_a_pooled_connection_is_not_reused_after_the_policy_tightens(self) -> None:
        await self.provision()
        await self.named_channel(int(self.fake.base_url.rsplit(":", 1)[1]))
        assert (await self.chat()).status == 200  # allowed: the connection is pooled
        assert self.fake.request_count == 1
        await set_private_allowed(self, False)
        blocked = await self.chat()
        assert blocked.status == 502, blocked
        assert self.fake.request_count == 1


class TaskPollNameTests(TaskTestCase):
    async def test_the_poller_does_not_reach_a_name_resolving_to_loopback(self) -> None:
        await self.provision_video()
        names = ScriptedNames({NAME: [["127.0.0.1"]]}).install(self, reactor)
        port = self.up.base_url.rsplit(":", 1)[1]
        await self.catalog.set(schema.channels, self.channel_id,
                               base_url=f"http://{NAME}:{port}")
        await self.catalog.announce()
        created = await self.submit()  # private upstreams allowed (provision): accepted
        assert created.status == 200, created
        assert len(self.up.submits) == 1
        await set_private_allowed(self, False)
        await self.drive(40)
        assert self.up.polls == []
        row = await self.task_row(created.json()["id"])
        assert row["status"] == "queued" and row["poll_errors"] >= 1
        assert NAME in names.asked
