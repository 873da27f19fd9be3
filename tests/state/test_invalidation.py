"""Cache invalidation across two nodes sharing one real Redis.

``announce`` on node A must reload A before it returns (the next request on A sees the write),
reach node B's reloaders soon after, and not reload A a second time from its own echo.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.defer import DeferredQueue
from twisted.trial.unittest import TestCase

from gateway.invalidation import CATALOG, KEYS, Invalidation
from gateway.state.redis import RedisState
from tests.support.redis_server import fresh_prefix, redis_server


class Reloads:
    """A reloader that records what it was asked to reload and lets a test wait for it."""

    def __init__(self) -> None:
        self.details: list[bytes] = []
        self.queue: DeferredQueue[bytes] = DeferredQueue()

    async def __call__(self, detail: bytes) -> None:
        self.details.append(detail)
        self.queue.put(detail)

    async def next(self, timeout: float = 5.0) -> bytes:
        d = self.queue.get()
        d.addTimeout(timeout, reactor)
        return await d


class Echo:
    """Bus subscriber added after ``Invalidation``'s: once it has a message, so has the node."""

    def __init__(self) -> None:
        self.queue: DeferredQueue[bytes] = DeferredQueue()

    def __call__(self, message: bytes) -> None:
        self.queue.put(message)

    async def next(self, timeout: float = 5.0) -> bytes:
        d = self.queue.get()
        d.addTimeout(timeout, reactor)
        return await d


class InvalidationAcrossNodesTests(TestCase):
    def setUp(self) -> None:
        self.server = redis_server()
        self.prefix = fresh_prefix()

    async def node(self) -> tuple[RedisState, Invalidation]:
        state = RedisState.from_url(reactor, self.server.url(self.prefix))
        self.addCleanup(state.stop)
        invalidation = Invalidation(state)
        self.addCleanup(invalidation.close)
        await state.start()
        return state, invalidation

    async def test_announce_reloads_here_first_then_the_other_node_once(self) -> None:
        state_a, a = await self.node()
        state_b, b = await self.node()
        reload_a, reload_b = Reloads(), Reloads()
        a.on(CATALOG, reload_a)
        b.on(CATALOG, reload_b)
        echo_a = Echo()
        state_a.subscribe(CATALOG, echo_a)
        await state_a.settled()
        await state_b.settled()

        # the local reload is done by the time announce returns
        await a.announce(CATALOG, b"model-7")
        assert reload_a.details == [b"model-7"]

        assert await reload_b.next() == b"model-7"
        # A's own echo has been handed to A's Invalidation by the time Echo sees it
        assert (await echo_a.next()).endswith(b"|model-7")
        assert reload_a.details == [b"model-7"]
        assert reload_b.details == [b"model-7"]

    async def test_each_node_reloads_once_per_announce_from_either_side(self) -> None:
        state_a, a = await self.node()
        state_b, b = await self.node()
        reload_a, reload_b, keys_b = Reloads(), Reloads(), Reloads()
        a.on(CATALOG, reload_a)
        b.on(CATALOG, reload_b)
        b.on(KEYS, keys_b)
        echo_a, echo_b = Echo(), Echo()
        state_a.subscribe(CATALOG, echo_a)
        state_b.subscribe(CATALOG, echo_b)
        await state_a.settled()
        await state_b.settled()

        await b.announce(CATALOG)
        assert reload_b.details == [b"*"]
        assert await reload_b.next() == b"*"  # the local reload
        assert await reload_a.next() == b"*"
        await a.announce(CATALOG, b"again")
        assert await reload_a.next() == b"again"  # the local reload
        assert await reload_b.next() == b"again"
        for echo in (echo_a, echo_b):
            await echo.next()
            await echo.next()
        assert reload_a.details == [b"*", b"again"]
        assert reload_b.details == [b"*", b"again"]
        assert keys_b.details == []

    async def test_closed_node_no_longer_reloads(self) -> None:
        _, a = await self.node()
        state_b, b = await self.node()
        reload_b = Reloads()
        b.on(CATALOG, reload_b)
        echo_b = Echo()
        state_b.subscribe(CATALOG, echo_b)
        await state_b.settled()
        b.close()
        await state_b.settled()
        await a.announce(CATALOG)
        await echo_b.next()
        assert reload_b.details == []

