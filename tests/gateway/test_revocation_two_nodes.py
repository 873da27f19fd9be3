"""Revocation reaches /v1 on every node at once (issue 15, finding 2).

Two Lockgate nodes share one database and one real redis-server.  Alice's login JWT (or API
key) is used on node B, so B's gateway user cache holds her; then node A changes her password,
disables her or deletes her.  Within one bus round trip (the message reaching B's subscriber)
B must refuse the old credential on /v1 -- before the fix B answered 200 and billed the call.
A lost bus message is bounded by the cache TTL.
"""

from __future__ import annotations

from typing import Any

import orjson
import treq
from sqlalchemy import update
from twisted.internet import reactor
from twisted.internet.defer import DeferredQueue
from twisted.internet.task import deferLater

from gateway.invalidation import USERS
from gateway.store import schema
from gateway.user_cache import DEFAULT_TTL
from tests.gateway.gateway_case import GatewayTestCase
from tests.support.app import Response
from tests.support.redis_nodes import SharedRedisNodes

CHAT = {"model": "gpt-fake", "max_tokens": 3, "messages": [{"role": "user", "content": "x"}]}


class RevocationAcrossNodesTests(SharedRedisNodes, GatewayTestCase):
    async def start_node_b(self) -> None:
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        self.base_b = self.serve(node)
        # B's own subscriber, added after its Invalidation's: once it has a USERS message,
        # so has B's user cache
        self.bus_b: DeferredQueue[bytes] = DeferredQueue()
        node.state.subscribe(USERS, self.bus_b.put)
        await node.state.settled()
        for _ in range(500):  # the catalog reaches node B over the bus
            if node.ctx.catalog.snapshot.candidates("gpt-fake"):
                break
            await deferLater(reactor, 0.01, lambda: None)

    async def one_bus_round_trip(self) -> None:
        d = self.bus_b.get()
        d.addTimeout(5, reactor)
        await d

    async def on_b(self, method: str, path: str, credential: str,
                   body: Any = None) -> Response:
        headers = {b"Authorization": [b"Bearer " + credential.encode()],
                   b"Content-Type": [b"application/json"]}
        data = orjson.dumps(body) if body is not None else None
        response = await treq.request(method, (self.base_b + path).encode(), data=data,
                                      headers=headers, pool=self.pool)
        return Response(response.code, response.headers, await treq.content(response))

    async def ready(self) -> None:
        await self.provision()
        await self.start_node_b()
        # both credentials work on B, and B's cache now holds alice
        assert (await self.on_b("GET", "/v1/models", self.user_token)).status == 200
        assert (await self.on_b("POST", "/v1/chat/completions", self.user_token,
                                CHAT)).status == 200
        assert (await self.on_b("GET", "/v1/models", self.api_key)).status == 200
        self.calls_before = self.fake.request_count

    async def test_password_change_on_a_refuses_the_old_jwt_on_b(self) -> None:
        await self.ready()
        changed = await self.call("POST", "/api/user/password/change", {
            "current_password": "password123", "new_password": "another-pass-456"},
            token=self.user_token)
        assert changed.status == 200, changed
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", "/v1/models", self.user_token)).status == 401
        chat = await self.on_b("POST", "/v1/chat/completions", self.user_token, CHAT)
        assert chat.status == 401, chat
        assert self.fake.request_count == self.calls_before  # not answered, not billed
        # the fresh token works on B
        fresh = changed.json()["token"]
        assert (await self.on_b("GET", "/v1/models", fresh)).status == 200

    async def test_disable_on_a_refuses_jwt_and_key_on_b(self) -> None:
        await self.ready()
        disabled = await self.call("PUT", f"/api/users/{self.user_id}", {"enabled": False},
                                   token=self.admin_token)
        assert disabled.status == 200, disabled
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", "/v1/models", self.user_token)).status == 401
        assert (await self.on_b("POST", "/v1/chat/completions", self.api_key,
                                CHAT)).status == 401
        assert self.fake.request_count == self.calls_before

    async def test_deletion_on_a_refuses_jwt_and_key_on_b(self) -> None:
        await self.ready()
        deleted = await self.call("DELETE", f"/api/users/{self.user_id}",
                                  token=self.admin_token)
        assert deleted.status == 200, deleted
        await self.one_bus_round_trip()
        assert (await self.on_b("GET", "/v1/models", self.user_token)).status == 401
        assert (await self.on_b("POST", "/v1/chat/completions", self.api_key,
                                CHAT)).status == 401
        assert self.fake.request_count == self.calls_before

    async def test_a_lost_message_is_bounded_by_the_ttl(self) -> None:
        await self.ready()

        def bump_silently(conn: Any) -> None:  # a revocation whose bus message was lost
            u = schema.users
            conn.execute(update(u).where(u.c.id == self.user_id)
                         .values(token_version=u.c.token_version + 1))

        await self.ctx.db.transaction(bump_silently)
        self.clock.advance(DEFAULT_TTL)
        assert (await self.on_b("GET", "/v1/models", self.user_token)).status == 401
