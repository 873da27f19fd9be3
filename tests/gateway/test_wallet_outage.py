"""A gateway whose shared wallet (Redis) goes away refuses calls with 503, never admits them.

The app runs on its own redis-server (not the session's shared one) so the test can stop it.
"""

from __future__ import annotations

from typing import Any

import orjson
import treq
from twisted.internet import reactor

from gateway.ledger.shared_wallet import SharedWallets
from gateway.ledger.wallet import WalletUnavailable
from gateway.state.redis import RedisState
from gateway.store import schema
from tests.gateway.gateway_case import GatewayTestCase
from tests.support.redis_server import RedisServer, redis_server


class WalletOutageTests(GatewayTestCase):
    def open_app(self, **overrides: Any) -> Any:
        redis_server()  # skips (or fails under LOCKGATE_REQUIRE_SERVERS) without redis-server
        self.redis = RedisServer()
        self.addCleanup(self.redis.stop)
        state = RedisState.from_url(reactor, self.redis.url() + "?timeout=0.5")
        state.start()  # commands wait for the connection; the app stops the state on close
        return super().open_app(state=state, **overrides)

    async def chat(self) -> tuple[int, Any]:
        response = await treq.post(
            (self.base + "/v1/chat/completions").encode(),
            data=orjson.dumps({"model": "gpt-fake", "max_tokens": 3,
                               "messages": [{"role": "user", "content": "x"}]}),
            headers={b"Authorization": [b"Bearer " + self.api_key.encode()],
                     b"Content-Type": [b"application/json"]}, pool=self.pool)
        return response.code, orjson.loads(await treq.content(response))

    async def test_redis_down_at_admission_answers_503_without_calling_upstream(self) -> None:
        await self.provision(balance="10")
        # no global rate limit: its window lives in Redis too and would fail first
        await self.ctx.live_settings.save({"rate_limit_enabled": "false"}, self.ctx.now())
        await self.catalog.set(schema.models, self.model_id, input_price_nanos=0)
        assert isinstance(self.gateway.wallets, SharedWallets)
        status, _ = await self.chat()
        assert status == 200
        assert self.fake.request_count == 1
        await self.gateway.settler.flush()
        await self.gateway.wallets.answered()  # its commit is in Redis before Redis goes

        self.redis.stop()
        status, body = await self.chat()
        assert status == 503, body
        assert body["error"]["message"] == "Billing is temporarily unavailable"
        assert self.fake.request_count == 1  # refused before any upstream call
        self.flushLoggedErrors(WalletUnavailable)

    async def test_redis_down_at_the_rate_limit_answers_503_too(self) -> None:
        await self.provision(balance="10")  # the global rate limit is on by default
        status, _ = await self.chat()
        assert status == 200
        await self.gateway.settler.flush()
        await self.gateway.wallets.answered()

        self.redis.stop()
        status, body = await self.chat()
        assert status == 503, body
        assert body["error"]["message"] == "Rate limiting is temporarily unavailable"
        assert self.fake.request_count == 1
        self.flushLoggedErrors()
