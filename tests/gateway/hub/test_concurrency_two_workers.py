"""The concurrency cases against two workers of one supervisor (``--workers 2`` without Redis).

Two Lockgate apps -- the two workers -- share one SQLite file and one state hub: a real
``HubFactory`` (with its ``WalletAuthority`` on its own engine, as the supervisor has) on a
real Unix socket, each app holding a ``HubState`` and ``HubWallets`` as a worker process does.
The calls are split over both.  The inherited cases prove one burst is admitted exactly; the
waves below also run through the workers' allowances (``gateway.hub.wallets``): after the first
wave each worker admits locally, and at the boundary the hub recalls what the other holds.
"""

from __future__ import annotations

import os
import tempfile
from decimal import Decimal
from typing import Any

import orjson
import treq
from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredList, ensureDeferred, gatherResults

from gateway.billing.money import to_nanos
from gateway.hub.client import HubState
from gateway.hub.server import HubFactory
from gateway.hub.wallets import HubWallets
from gateway.ledger.wallet_authority import WalletAuthority
from gateway.store.pool import DBRunner, make_engine
from tests.gateway.hub.test_hub import until
from tests.gateway.test_concurrency import CALL_COST, TwoNodesTests


class HubWorkersTests(TwoNodesTests):
    """``TwoNodesTests`` with the supervisor's hub in place of Redis."""

    def setUp(self) -> Deferred[Any]:
        self.connecting: list[Deferred[None]] = []
        self.hub_wallets: list[HubWallets] = []
        super().setUp()
        return DeferredList(self.connecting, fireOnOneErrback=True)

    def start_hub(self) -> None:
        directory = tempfile.mkdtemp(prefix="lockgate-hub-test-")
        self.hub_path = os.path.join(directory, "hub.sock")
        engine, threads = make_engine(self.database_url)
        hub_db = DBRunner(reactor, engine, threads)
        hub_db.start()
        self.addCleanup(hub_db.stop)
        port = reactor.listenUNIX(self.hub_path, HubFactory(reactor, WalletAuthority(hub_db)))
        self.addCleanup(port.stopListening)

    def open_app(self, **overrides: Any) -> Any:
        if not hasattr(self, "hub_path"):
            self.start_hub()
        state = HubState(reactor, self.hub_path)
        wallets = HubWallets(state)
        self.hub_wallets.append(wallets)
        d = state.start()
        self.connecting.append(d)
        # the app stops the state on close
        return super(TwoNodesTests, self).open_app(state=state, wallets=wallets, **overrides)

    async def wave(self, count: int, token: str, other: str) -> list[int]:
        body = orjson.dumps({"model": "gpt-fake", "max_tokens": 3,
                             "messages": [{"role": "user", "content": "x"}]})

        async def one(base: str) -> int:
            response = await treq.post(
                (base + "/v1/chat/completions").encode(), data=body,
                headers={b"Authorization": [b"Bearer " + token.encode()],
                         b"Content-Type": [b"application/json"]}, pool=self.pool)
            await treq.content(response)
            return int(response.code)

        statuses: list[int] = await gatherResults(
            [ensureDeferred(one(self.base if i % 2 else other)) for i in range(count)])
        return statuses

    async def test_waves_through_allowances_admit_a_balance_for_50_exactly(self) -> None:
        await self.provision(balance=str(CALL_COST * 50))
        await self.free_input()
        other = await self.second_node()
        first = await self.wave(30, self.api_key, other)
        assert first.count(200) == 30, sorted(first)
        # both workers were busy: each now holds an allowance and admits on its own
        await until(lambda: all(wallets.allowance_nanos(self.user_id, self.key_id) > 0
                                for wallets in self.hub_wallets))
        second = await self.wave(30, self.api_key, other)
        third = await self.wave(10, self.api_key, other)
        assert second.count(200) == 20, sorted(second)
        assert sorted(set(second + third)) == [200, 402]
        assert third.count(200) == 0
        assert self.fake.request_count == 50
        await DeferredList([self.gateway.settler.flush(), self.node_b.gateway.settler.flush()])
        assert await self.balance_nanos(self.user_id) == 0
        assert await self.ledger_sum(self.user_id) == -to_nanos(CALL_COST * Decimal(50))
        await self.verify_ledger()
