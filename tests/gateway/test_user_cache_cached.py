"""``UserCache.cached``: the /v1 path's Deferred-free read of a remembered user.

It must answer only what ``get`` would answer from memory: nothing for a user never loaded,
nothing once the entry is older than the cache's ttl (a lost invalidation is bounded by it),
and nothing after an invalidation -- in every such case the caller falls back to ``get``,
which reads the database again.
"""

from __future__ import annotations

from gateway.invalidation import USERS
from gateway.user_cache import DEFAULT_TTL
from tests.gateway.gateway_case import GatewayTestCase

CHAT = {"model": "gpt-fake", "messages": [{"role": "user", "content": "hi"}]}


class CachedUserTests(GatewayTestCase):
    async def chat(self):  # type: ignore[no-untyped-def]
        return await self.call("POST", "/v1/chat/completions", CHAT,
                               headers={"Authorization": f"Bearer {self.api_key}"})

    async def test_fresh_entries_only(self) -> None:
        await self.provision()
        users = self.ctx.sessions.users
        users_seen = users.cached(self.user_id)
        assert (await self.chat()).status == 200
        user = users.cached(self.user_id)
        assert user is not None and user.id == self.user_id and user.enabled
        assert users_seen is None or users_seen.id == self.user_id
        assert users.cached(self.user_id + 1000) is None
        self.clock.advance(DEFAULT_TTL - 1)
        assert users.cached(self.user_id) is user
        self.clock.advance(1)  # as old as the ttl: get would reload it, so cached says nothing
        assert users.cached(self.user_id) is None
        assert (await self.chat()).status == 200
        assert users.cached(self.user_id) is not None

    async def test_an_invalidation_is_seen_at_once(self) -> None:
        await self.provision()
        assert (await self.chat()).status == 200
        assert self.ctx.sessions.users.cached(self.user_id) is not None
        await self.ctx.invalidation.announce(USERS, str(self.user_id).encode())
        assert self.ctx.sessions.users.cached(self.user_id) is None
        result = await self.call("PUT", f"/api/users/{self.user_id}", {"enabled": False},
                                 token=self.admin_token)
        assert result.status == 200
        assert (await self.chat()).status == 401
        cached = self.ctx.sessions.users.cached(self.user_id)
        assert cached is None or not cached.enabled
