"""Concurrent calls cannot overspend: a key quota (or balance) that covers 10 calls lets at
most 10 reach the upstream, whatever the concurrency; money never goes negative; the ledger
sums to the balance."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import orjson
import treq
from sqlalchemy import select
from twisted.internet import reactor
from twisted.internet.defer import gatherResults
from twisted.internet.task import deferLater

from gateway.billing.money import to_nanos
from gateway.state.redis import RedisState
from gateway.store import schema
from tests.gateway.gateway_case import OUTPUT_PRICE, GatewayTestCase
from tests.support.redis_server import fresh_prefix, redis_server

#: each call: 3 output tokens at OUTPUT_PRICE per 1M, input free
CALL_COST = Decimal(3) * Decimal(OUTPUT_PRICE) / Decimal(1_000_000)


class ConcurrencyTests(GatewayTestCase):
    async def fire(self, count: int, token: str) -> list[int]:
        body = orjson.dumps({"model": "gpt-fake", "max_tokens": 3,
                             "messages": [{"role": "user", "content": "x"}]})

        async def one() -> int:
            response = await treq.post(
                (self.base + "/v1/chat/completions").encode(), data=body,
                headers={b"Authorization": [b"Bearer " + token.encode()],
                         b"Content-Type": [b"application/json"]}, pool=self.pool)
            await treq.content(response)
            return response.code

        from twisted.internet.defer import ensureDeferred
        return await gatherResults([ensureDeferred(one()) for _ in range(count)])

    async def free_input(self) -> None:
        """Input free (so each call costs exactly CALL_COST) and no global rate limit."""
        await self.catalog.set(schema.models, self.model_id, input_price_nanos=0)
        await self.ctx.live_settings.save({"rate_limit_enabled": "false"}, self.ctx.now())

    async def test_key_quota_covering_ten_admits_at_most_ten_of_200(self) -> None:
        quota = CALL_COST * 10
        await self.provision(balance="1000", key_body={"name": "k", "quota": str(quota)})
        await self.free_input()
        statuses = await self.fire(200, self.api_key)
        assert statuses.count(200) == 10, sorted(statuses)
        assert statuses.count(402) == 190
        assert self.fake.request_count == 10
        await self.gateway.settler.flush()
        spent = await self.ctx.db.transaction(lambda c: c.execute(
            select(schema.api_keys.c.spent_nanos).where(
                schema.api_keys.c.id == self.key_id)).scalar_one())
        assert spent == to_nanos(quota)
        balance = await self.balance_nanos(self.user_id)
        assert balance == to_nanos(Decimal(1000) - quota)
        assert await self.ledger_sum(self.user_id) == balance - to_nanos(Decimal(1000))
        await self.verify_ledger()

    async def test_balance_covering_ten_admits_at_most_ten_of_200(self) -> None:
        await self.provision(balance=str(CALL_COST * 10))
        await self.free_input()
        statuses = await self.fire(200, self.api_key)
        assert statuses.count(200) == 10, sorted(statuses)
        assert self.fake.request_count == 10
        await self.gateway.settler.flush()
        assert await self.balance_nanos(self.user_id) == 0
        assert await self.ledger_sum(self.user_id) == -to_nanos(CALL_COST * 10)
        await self.verify_ledger()


class ConcurrencyOnPostgresTests(ConcurrencyTests):
    backend = "postgresql"


class TwoNodesTests(ConcurrencyTests):
    """The same two cases with the calls split over two Lockgate processes ("nodes") that share
    one database and one real redis-server: the quota and the balance hold for the fleet, not
    per node (each node's own memory would let up to 10 through *each*)."""

    def open_app(self, **overrides: Any) -> Any:
        if not hasattr(self, "redis_url"):
            self.redis_url = redis_server().url(fresh_prefix())
        state = RedisState.from_url(reactor, self.redis_url)
        state.start()  # commands wait for the connection; the app stops the state on close
        return super().open_app(state=state, **overrides)

    async def second_node(self) -> str:
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        base = self.serve(node)
        for _ in range(500):  # the catalog reaches the second node over the Redis bus
            if node.ctx.catalog.snapshot.candidates("gpt-fake"):
                break
            await deferLater(reactor, 0.01, lambda: None)
        assert node.ctx.catalog.snapshot.candidates("gpt-fake"), "catalog never arrived"
        return base

    async def fire(self, count: int, token: str) -> list[int]:
        other = await self.second_node()
        body = orjson.dumps({"model": "gpt-fake", "max_tokens": 3,
                             "messages": [{"role": "user", "content": "x"}]})

        async def one(base: str) -> int:
            response = await treq.post(
                (base + "/v1/chat/completions").encode(), data=body,
                headers={b"Authorization": [b"Bearer " + token.encode()],
                         b"Content-Type": [b"application/json"]}, pool=self.pool)
            await treq.content(response)
            return response.code

        from twisted.internet.defer import ensureDeferred
        statuses = await gatherResults([ensureDeferred(one(self.base if i % 2 else other))
                                        for i in range(count)])
        await self.node_b.gateway.settler.flush()  # the test body flushes the first node's
        return statuses
