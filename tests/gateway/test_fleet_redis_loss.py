"""Two Lockgate nodes on one PostgreSQL and one redis-server, when Redis goes away or a node
dies (operations contract §5 and §7; issue 14, defects 3 to 5).

Node A is the test's app (``self.base``), node B a second app on the same database and Redis
with its own listener.  The redis-server is this test's own, so it can be stopped and started
again; Redis outages take real time (bounded waits), a dead node's holds run out on the shared
test ``Clock`` that both nodes' wallets renew and sweep by.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import treq
from sqlalchemy import select
from twisted.internet import reactor
from twisted.internet.task import deferLater

from gateway.billing.money import to_nanos
from gateway.ledger.shared_wallet import HOLDS
from gateway.state.redis import RedisState
from gateway.store import schema
from tap.app import Lockgate
from tests.gateway.gateway_case import GatewayTestCase
from tests.support.redis_server import RedisServer, fresh_prefix, redis_server


async def eventually(condition: Callable[[], bool], seconds: float) -> float:
    """Wait (real time, polling) until ``condition()``; returns the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not true within {seconds} s")
        await deferLater(reactor, 0.01, lambda: None)
    return time.monotonic() - started


class FleetRedisLossTests(GatewayTestCase):
    backend = "postgresql"

    def open_app(self, **overrides: Any) -> Lockgate:
        if not hasattr(self, "redis"):
            redis_server()  # skips (or fails under LOCKGATE_REQUIRE_SERVERS) without it
            self.redis = RedisServer()
            self.addCleanup(self.redis.stop)  # after the apps closed (cleanups run LIFO)
            self.prefix = fresh_prefix()
        # the default command timeout: the contract's 2 s must hold without tuning
        state = RedisState.from_url(reactor, self.redis.url(self.prefix))
        state.start()  # commands wait for the first connection; the app stops the state
        return super().open_app(state=state, **overrides)

    async def second_node(self) -> str:
        node = self.node_b = self.open_app()
        self.addCleanup(node.close)
        base = self.serve(node)
        # the catalog reaches the second node over the Redis bus
        await eventually(lambda: bool(node.ctx.catalog.snapshot.candidates("gpt-fake")), 5)
        return base

    async def chat(self, base: str) -> tuple[int, Any, Any]:
        response = await treq.post(
            (base + "/v1/chat/completions").encode(),
            data=orjson.dumps({"model": "gpt-fake", "max_tokens": 3,
                               "messages": [{"role": "user", "content": "x"}]}),
            headers={b"Authorization": [b"Bearer " + self.api_key.encode()],
                     b"Content-Type": [b"application/json"]}, pool=self.pool)
        return response.code, response.headers, orjson.loads(await treq.content(response))

    async def readyz(self, base: str) -> tuple[int, Any]:
        response = await treq.get((base + "/readyz").encode(), pool=self.pool)
        return response.code, orjson.loads(await treq.content(response))

    async def no_rate_limit(self) -> None:
        await self.ctx.live_settings.save({"rate_limit_enabled": "false"}, self.ctx.now())

    def holds_in_redis(self) -> int:
        return int(self.redis.command("ZCARD", self.prefix + HOLDS))

    # --- defect 3: Redis stopped ---------------------------------------------------------

    async def test_redis_stopped_every_node_answers_503_within_2s_and_is_not_ready(
            self) -> None:
        await self.provision(balance="10")
        other = await self.second_node()
        for base in (self.base, other):
            status, _, body = await self.chat(base)
            assert status == 200, body
            assert await self.readyz(base) == (200, {"status": "ready"})
        calls = self.fake.request_count
        for node in (self.app, self.node_b):  # their commits reach Redis before it goes
            await node.gateway.settler.flush()
            await node.gateway.wallets.answered()

        self.redis.halt()
        for base in (self.base, other):
            started = time.monotonic()
            status, headers, body = await self.chat(base)
            elapsed = time.monotonic() - started
            assert status == 503, body
            assert elapsed <= 2.0, f"503 after {elapsed:.2f} s"
            assert body["error"]["type"] == "service_unavailable"
            assert headers.getRawHeaders("retry-after") == ["1"]

            started = time.monotonic()
            ready = await self.readyz(base)
            assert time.monotonic() - started <= 2.0
            assert ready == (503, {"status": "shared state unreachable"})
        assert self.fake.request_count == calls  # no upstream call while Redis is away
        self.flushLoggedErrors()

    # --- defect 4: invalidations lost around a restart -----------------------------------

    async def test_a_price_and_setting_changed_in_the_outage_apply_on_the_other_node_in_1s(
            self) -> None:
        await self.provision(balance="10")
        other = await self.second_node()
        status, _, body = await self.chat(other)
        assert status == 200, body

        self.redis.halt()
        await deferLater(reactor, 0.5, lambda: None)  # every node has seen Redis go
        changed = await self.call("PUT", f"/api/models/{self.model_id}", {
            "model_name": "gpt-fake", "input_price": "10", "output_price": "20"},
            token=self.admin_token)
        assert changed.status == 200, changed  # committed and applied on A; B cannot hear
        await self.ctx.live_settings.save({"rate_limit_enabled": "false"}, self.ctx.now())
        assert self.node_b.ctx.settings.flag("rate_limit_enabled")

        self.redis.resume()  # empty, as a restarted Redis without persistence is
        await deferLater(reactor, 1.0, lambda: None)
        assert not self.node_b.ctx.settings.flag("rate_limit_enabled")
        status, _, body = await self.chat(other)
        assert status == 200, body
        await self.node_b.gateway.settler.flush()
        row = (await self.usage_rows())[-1]
        usage = body["usage"]
        expected = (Decimal(usage["prompt_tokens"]) * 10
                    + Decimal(usage["completion_tokens"]) * 20) / Decimal(1_000_000)
        assert Decimal(row["cost_nanos"]) / Decimal(10**9) == expected
        self.flushLoggedErrors()

    async def test_holds_of_running_requests_are_rebuilt_when_redis_comes_back_empty(
            self) -> None:
        await self.provision(balance="10")
        await self.no_rate_limit()
        other = await self.second_node()
        # a request on A holds the whole balance when Redis restarts empty
        held = await self.app.gateway.wallets.reserve("running", self.user_id, self.key_id,
                                                      to_nanos(Decimal(10)))
        assert (await self.chat(other))[0] == 402

        self.redis.halt()
        await deferLater(reactor, 0.5, lambda: None)
        self.redis.resume()
        await eventually(lambda: self.holds_in_redis() == 1, 2)
        await eventually(lambda: self.node_b.state.available, 2)
        status, _, body = await self.chat(other)
        assert status == 402, body  # the balance A still holds is not admitted twice

        self.app.gateway.wallets.release(held)
        await self.app.gateway.wallets.answered()
        assert (await self.chat(other))[0] == 200
        self.flushLoggedErrors()

    # --- defect 5: a dead node's holds ---------------------------------------------------

    async def test_a_dead_nodes_reservation_and_queued_debit_are_given_back_within_60s(
            self) -> None:
        await self.provision(balance="10")
        await self.no_rate_limit()
        other = await self.second_node()
        wallets = self.app.gateway.wallets
        # A, mid-stream, holds half the balance, and has a settlement of the other half queued
        await wallets.reserve("streaming", self.user_id, self.key_id, to_nanos(Decimal(5)))
        wallets.settling(None, self.user_id, self.key_id, to_nanos(Decimal(5)))
        await wallets.answered()
        assert self.holds_in_redis() == 2
        assert (await self.chat(other))[0] == 402

        # A dies: its renewals stop and its connections close; it gives nothing back
        await wallets.stop()
        await self.app.state.stop()

        admitted_after = None
        for second in range(1, 61):
            self.clock.advance(1)  # B renews its own holds and sweeps expired ones
            await deferLater(reactor, 0.02, lambda: None)
            if (await self.chat(other))[0] == 200:
                admitted_after = second
                break
        assert admitted_after is not None, "A's holds still block B 60 s after its death"
        # admissible again exactly as the ledger says: the queued debit never committed
        await self.node_b.gateway.settler.flush()
        await self.node_b.gateway.wallets.answered()
        assert self.holds_in_redis() == 0
        balance = await self.ctx.db.transaction(lambda conn: conn.execute(
            select(schema.users.c.balance_nanos).where(schema.users.c.id == self.user_id)
        ).scalar_one())
        assert balance == to_nanos(Decimal(10)) + await self.ledger_sum(self.user_id)
        self.flushLoggedErrors()
