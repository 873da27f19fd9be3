"""``RedisState`` knows when Redis is gone and when it is back (operations contract §5).

Each test runs its own redis-server so it can stop, restart or pause it.  Outages are real
(the server process stops), so time is real here; every wait is bounded.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import txredisapi
from twisted.internet import reactor
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import TestCase

from gateway.invalidation import CATALOG, EVERYTHING, Invalidation
from gateway.state.memory import MemoryState
from gateway.state.protocol import SharedStateUnavailable
from gateway.state.redis import RedisState
from tests.state.test_invalidation import Reloads
from tests.support.redis_server import RedisServer, fresh_prefix, redis_server


async def eventually(condition: Callable[[], bool], seconds: float) -> float:
    """Wait (real time, polling) until ``condition()``; returns the seconds it took."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not true within {seconds} s")
        await deferLater(reactor, 0.01, lambda: None)
    return time.monotonic() - started


class Recoveries:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


class RedisReachabilityTests(TestCase):
    def setUp(self) -> None:
        redis_server()  # skips (or fails under LOCKGATE_REQUIRE_SERVERS) without redis-server
        self.server = RedisServer()
        self.addCleanup(self.server.stop)

    async def state(self, query: str = "") -> RedisState:
        state = RedisState.from_url(reactor, self.server.url(fresh_prefix()) + query)
        self.addCleanup(state.stop)
        await state.start()
        await eventually(lambda: state.available, 2)
        return state

    async def test_a_stopped_server_fails_commands_at_once_and_its_return_is_announced(
            self) -> None:
        state = await self.state()
        recoveries = Recoveries()
        state.on_recovered(recoveries)
        assert await state.incr("n") == 1
        assert recoveries.count == 0  # the first connection is no recovery

        self.server.halt()
        noticed = await eventually(lambda: not state.available, 1)
        assert noticed < 1
        started = time.monotonic()
        with self.assertRaises(SharedStateUnavailable):
            await state.incr("n")
        with self.assertRaises(SharedStateUnavailable):
            await state.publish("c", b"m")
        assert time.monotonic() - started < 0.1  # no waiting for a connection

        self.server.resume()
        back = await eventually(lambda: state.available, 2)
        assert back < 1  # reconnect attempts keep coming, at most half a second apart
        assert recoveries.count == 1
        assert await state.incr("n") == 1  # the server restarted empty

    async def test_a_server_that_stops_answering_is_unavailable_until_it_answers(
            self) -> None:
        state = await self.state()
        recoveries = Recoveries()
        state.on_recovered(recoveries)
        self.server.command("CLIENT", "PAUSE", 3000, "ALL")
        started = time.monotonic()
        # a command sent to the hung server fails once the heartbeat notices, not at 5 s
        with self.assertRaises(txredisapi.ConnectionError):
            await state.incr("slow")
        assert time.monotonic() - started <= 2.2
        assert not state.available
        started = time.monotonic()
        with self.assertRaises(SharedStateUnavailable):
            await state.incr("slow")
        assert time.monotonic() - started < 0.1
        await eventually(lambda: state.available, 5)
        assert recoveries.count == 1
        assert await state.incr("after") == 1

    async def test_a_node_reloads_everything_when_redis_is_back(
            self) -> None:
        state_a = await self.state()
        state_b = RedisState.from_url(reactor, self.server.url(state_a.prefix))
        self.addCleanup(state_b.stop)
        await state_b.start()
        a, b = Invalidation(state_a), Invalidation(state_b)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        reload_a, reload_b = Reloads(), Reloads()
        a.on(CATALOG, reload_a)
        b.on(CATALOG, reload_b)
        await state_a.settled()
        await state_b.settled()
        await eventually(lambda: state_b.available, 2)

        self.server.halt()
        await eventually(lambda: not state_a.available, 1)
        # the write is applied here and its announcement does not fail...
        await a.announce(CATALOG, b"price-7")
        assert reload_a.details == [b"price-7"]
        assert reload_b.details == []

        # ...and once Redis is back B reloads everything (A publishes its announcement again
        # too, which B hears only if it re-subscribed first: the reload covers it anyway)
        self.server.resume()
        # the re-published announcement may reach B before or after its own recovery reload
        heard = [await reload_b.next(timeout=2)]
        if heard[0] != EVERYTHING:
            heard.append(await reload_b.next(timeout=2))
        assert EVERYTHING in heard and set(heard) <= {EVERYTHING, b"price-7"}, heard


class MemoryReachabilityTests(TestCase):
    def test_memory_is_always_available_and_never_recovers(self) -> None:
        state = MemoryState(Clock())
        called: list[Any] = []
        remove = state.on_recovered(lambda: called.append(1))
        assert state.available is True
        remove()
        assert called == []
