"""One contract for ``SharedState``, run against ``MemoryState`` and ``RedisState`` alike.

Time: the memory state runs on a ``Clock``; for Redis, ``advance(seconds)`` moves every TTL
under the test's prefix down by that much (deleting what reaches zero), which is what the
passing of time does to Redis windows and claims.  One test waits for a real 1 s window.
"""

from __future__ import annotations

import socket
from typing import Any

import txredisapi
from twisted.internet import reactor
from twisted.internet.defer import CancelledError, DeferredQueue, TimeoutError, gatherResults
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import TestCase

from gateway.state.memory import MemoryState
from gateway.state.protocol import WindowVerdict
from gateway.state.redis import RedisState
from tests.support.redis_server import RedisServer, fresh_prefix, redis_server

#: moves every TTL under ARGV[1] down by ARGV[2] ms, deleting keys that reach zero
ADVANCE = """
for _, key in ipairs(redis.call('KEYS', ARGV[1] .. '*')) do
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then
    local left = ttl - tonumber(ARGV[2])
    if left <= 0 then redis.call('DEL', key) else redis.call('PEXPIRE', key, left) end
  end
end
return 0
"""


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Inbox:
    """Collects bus messages; ``next()`` waits (bounded) for the next one."""

    def __init__(self) -> None:
        self.queue: DeferredQueue[bytes] = DeferredQueue()
        self.received: list[bytes] = []

    def __call__(self, message: bytes) -> None:
        self.received.append(message)
        self.queue.put(message)

    async def next(self, timeout: float = 5.0) -> bytes:
        d = self.queue.get()
        d.addTimeout(timeout, reactor)
        return await d


class SharedStateContract:
    """The behaviour every ``SharedState`` must have. Subclasses provide the states and time."""

    async def new_state(self) -> Any:
        raise NotImplementedError

    async def advance(self, seconds: float) -> None:
        raise NotImplementedError

    async def settle(self, state: Any) -> None:
        """Wait until subscriptions made so far are in force."""

    async def test_take_all_is_all_or_nothing(self: Any) -> None:
        state = await self.new_state()
        assert await state.take_all([("a", 2), ("b", 1)], 60) == WindowVerdict(True, 0, 0)
        # b is full: refused, and a is not counted for the refused call
        assert await state.take_all([("a", 2), ("b", 1)], 60) == WindowVerdict(False, 0, 60)
        assert await state.take_all([("a", 2)], 60) == WindowVerdict(True, 0, 0)
        assert (await state.take_all([("a", 2)], 60)).allowed is False

    async def test_take_all_remaining_is_the_smallest(self: Any) -> None:
        state = await self.new_state()
        assert await state.take_all([("x", 5), ("y", 3)], 60) == WindowVerdict(True, 2, 0)
        assert await state.take_all([("x", 5), ("y", 10)], 60) == WindowVerdict(True, 3, 0)
        assert await state.take_all([], 60) == WindowVerdict(True, 0, 0)

    async def test_take_all_same_key_twice_counts_once_under_the_smaller_limit(self: Any) -> None:
        state = await self.new_state()
        assert await state.take_all([("k", 3), ("k", 2)], 60) == WindowVerdict(True, 1, 0)
        assert await state.take_all([("k", 3)], 60) == WindowVerdict(True, 1, 0)
        assert (await state.take_all([("k", 3), ("k", 2)], 60)).allowed is False

    async def test_take_all_zero_limit_refuses_with_full_window(self: Any) -> None:
        state = await self.new_state()
        assert await state.take_all([("z", 0)], 30) == WindowVerdict(False, 0, 30)

    async def test_hit_counts_refused_calls(self: Any) -> None:
        state = await self.new_state()
        verdicts = [await state.hit("h", 2, 60) for _ in range(4)]
        assert verdicts == [WindowVerdict(True, 1, 0), WindowVerdict(True, 0, 0),
                            WindowVerdict(False, 0, 60), WindowVerdict(False, 0, 60)]
        # 4 counted: a take_all with limit 5 has exactly one left
        assert await state.take_all([("h", 5)], 60) == WindowVerdict(True, 0, 0)

    async def test_retry_after_counts_down_and_is_at_least_one(self: Any) -> None:
        state = await self.new_state()
        await state.hit("r", 1, 60)
        await self.advance(20)
        assert await state.take_all([("r", 1)], 60) == WindowVerdict(False, 0, 40)
        assert await state.hit("r", 1, 60) == WindowVerdict(False, 0, 40)
        await self.advance(39.7)
        assert await state.take_all([("r", 1)], 60) == WindowVerdict(False, 0, 1)

    async def test_windows_are_fixed_and_open_at_the_first_call(self: Any) -> None:
        state = await self.new_state()
        assert (await state.take_all([("w", 2)], 60)).allowed
        await self.advance(30)
        assert (await state.take_all([("w", 2)], 60)).allowed
        assert (await state.take_all([("w", 2)], 60)).allowed is False
        # the window opened 60 s ago: it is over, whatever happened in between
        await self.advance(30)
        assert await state.take_all([("w", 2)], 60) == WindowVerdict(True, 1, 0)
        await self.advance(60)
        assert await state.hit("w", 2, 60) == WindowVerdict(True, 1, 0)

    async def test_incr(self: Any) -> None:
        state = await self.new_state()
        assert await state.incr("c") == 1
        assert await state.incr("c", 5) == 6
        assert await state.incr("d", -2) == -2
        await self.advance(86400)
        assert await state.incr("c", 0) == 6

    async def test_claim_once_then_release_or_expiry(self: Any) -> None:
        state = await self.new_state()
        assert await state.claim("job", 10) is True
        assert await state.claim("job", 10) is False
        await state.release("job")
        assert await state.claim("job", 10) is True
        await self.advance(9)
        assert await state.claim("job", 10) is False
        await self.advance(1)
        assert await state.claim("job", 10) is True
        await state.release("never-claimed")

    async def test_fifty_concurrent_claims_one_winner(self: Any) -> None:
        state = await self.new_state()
        results = await gatherResults([state.claim("once", 30) for _ in range(50)])
        assert sorted(results) == [False] * 49 + [True]

    async def test_publish_reaches_every_subscriber_of_the_channel_here(self: Any) -> None:
        state = await self.new_state()
        first, second, other = Inbox(), Inbox(), Inbox()
        state.subscribe("news", first)
        state.subscribe("news", second)
        state.subscribe("other", other)
        await self.settle(state)
        binary = bytes(range(256))
        await state.publish("news", b"007")
        await state.publish("news", binary)
        assert [await first.next(), await first.next()] == [b"007", binary]
        assert [await second.next(), await second.next()] == [b"007", binary]
        await state.publish("other", b"done")
        assert await other.next() == b"done"
        assert other.received == [b"done"]

    async def test_unsubscribe_stops_delivery(self: Any) -> None:
        state = await self.new_state()
        gone, kept, sentinel = Inbox(), Inbox(), Inbox()
        unsubscribe = state.subscribe("bus", gone)
        state.subscribe("bus", kept)
        unsubscribe_alone = state.subscribe("alone", gone)
        state.subscribe("sentinel", sentinel)
        await self.settle(state)
        unsubscribe()
        unsubscribe()  # idempotent
        unsubscribe_alone()
        await self.settle(state)
        await state.publish("bus", b"one")
        await state.publish("alone", b"two")
        await state.publish("sentinel", b"last")
        assert await kept.next() == b"one"
        # the sentinel comes after the others on the same subscriber: all delivered by now
        assert await sentinel.next() == b"last"
        assert gone.received == []

class MemoryStateTests(SharedStateContract, TestCase):
    async def new_state(self) -> MemoryState:
        if not hasattr(self, "clock"):
            self.clock = Clock()
            self.clock.advance(1_800_000_000)
        state = MemoryState(self.clock)
        await state.start()
        self.addCleanup(state.stop)
        return state

    async def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)


class RedisHarness:
    """Fresh prefix per test on the shared server; time moves by shifting TTLs."""

    server: RedisServer
    tls = False

    def setUp(self) -> None:
        self.server = redis_server(tls=self.tls)
        self.prefix = fresh_prefix()

    async def new_state(self, **overrides: Any) -> RedisState:
        state = RedisState.from_url(reactor, self.server.url(self.prefix), **overrides)
        self.addCleanup(state.stop)
        await state.start()
        return state

    async def advance(self, seconds: float) -> None:
        self.server.command("EVAL", ADVANCE, 0, self.prefix, round(seconds * 1000))

    async def settle(self, state: Any) -> None:
        await state.settled()


class RedisStateTests(RedisHarness, SharedStateContract, TestCase):
    """The contract plus what only a networked state has: TTLs, nodes, reconnects, URLs."""

    async def test_failing_subscriber_does_not_stop_the_others(self) -> None:
        # (MemoryState lets the exception reach the publisher; a Redis bus cannot)
        state = await self.new_state()

        def broken(message: bytes) -> None:
            raise ValueError("boom")

        inbox = Inbox()
        state.subscribe("c", broken)
        state.subscribe("c", inbox)
        await self.settle(state)
        await state.publish("c", b"m")
        assert await inbox.next() == b"m"
        assert len(self.flushLoggedErrors(ValueError)) == 1

    async def test_window_ttl_is_set_once_when_the_window_opens(self) -> None:
        state = await self.new_state()
        await state.take_all([("t", 1)], 60)
        ttl = self.server.command("PTTL", self.prefix + "t")
        assert 59_000 < ttl <= 60_000
        await self.advance(10)
        # refused calls and later calls do not move the window's end
        assert (await state.take_all([("t", 1)], 60)).allowed is False
        await state.hit("t", 1, 60)
        assert 49_000 < self.server.command("PTTL", self.prefix + "t") <= 50_000
        assert self.server.command("GET", self.prefix + "t") == b"2"

    async def test_counter_without_expiry_gets_one(self) -> None:
        state = await self.new_state()
        self.server.command("SET", self.prefix + "stuck", 5)
        assert await state.take_all([("stuck", 5)], 30) == WindowVerdict(False, 0, 30)
        assert 29_000 < self.server.command("PTTL", self.prefix + "stuck") <= 30_000
        self.server.command("SET", self.prefix + "stuck2", 1)
        assert await state.hit("stuck2", 5, 30) == WindowVerdict(True, 3, 0)
        assert 29_000 < self.server.command("PTTL", self.prefix + "stuck2") <= 30_000

    async def test_a_real_one_second_window_expires(self) -> None:
        state = await self.new_state()
        assert (await state.hit("real", 1, 1)).allowed
        assert await state.hit("real", 1, 1) == WindowVerdict(False, 0, 1)
        await deferLater(reactor, 1.05, lambda: None)
        assert await state.hit("real", 1, 1) == WindowVerdict(True, 0, 0)

    async def test_keys_and_channels_carry_the_prefix(self) -> None:
        state = await self.new_state()
        await state.incr("plain")
        assert self.server.command("GET", self.prefix + "plain") == b"1"
        assert self.server.command("EXISTS", "plain") == 0
        unsubscribe = state.subscribe("chan", Inbox())
        await state.settled()
        assert self.server.command("PUBSUB", "CHANNELS", self.prefix + "*") == [
            (self.prefix + "chan").encode()]
        # the last unsubscribe leaves the Redis channel too
        unsubscribe()
        await state.settled()
        assert self.server.command("PUBSUB", "CHANNELS", self.prefix + "*") == []
        # another prefix is another namespace
        other = await self.new_state(prefix=self.prefix + "other:")
        assert await other.incr("plain") == 1

    async def test_two_nodes_share_counters_claims_and_the_bus(self) -> None:
        a = await self.new_state()
        b = await self.new_state()
        assert (await a.take_all([("shared", 2)], 60)).allowed
        assert await b.take_all([("shared", 2)], 60) == WindowVerdict(True, 0, 0)
        assert (await a.take_all([("shared", 2)], 60)).allowed is False
        assert await a.hit("h", 3, 60) == WindowVerdict(True, 2, 0)
        assert await b.hit("h", 3, 60) == WindowVerdict(True, 1, 0)
        assert await a.incr("n", 2) == 2
        assert await b.incr("n", 3) == 5
        claims = await gatherResults(
            [node.claim("leader", 30) for _ in range(25) for node in (a, b)])
        assert claims.count(True) == 1
        inbox_a, inbox_b = Inbox(), Inbox()
        a.subscribe("events", inbox_a)
        b.subscribe("events", inbox_b)
        await gatherResults([a.settled(), b.settled()])
        await a.publish("events", b"from a")
        await b.publish("events", b"from b")
        assert {await inbox_b.next(), await inbox_b.next()} == {b"from a", b"from b"}
        assert {await inbox_a.next(), await inbox_a.next()} == {b"from a", b"from b"}

    async def test_concurrent_take_all_on_two_nodes_never_over_admits(self) -> None:
        a = await self.new_state()
        b = await self.new_state()
        verdicts = await gatherResults(
            [node.take_all([("burst", 7), ("other", 100)], 60)
             for _ in range(20) for node in (a, b)])
        assert sum(v.allowed for v in verdicts) == 7
        assert self.server.command("GET", self.prefix + "burst") == b"7"
        assert self.server.command("GET", self.prefix + "other") == b"7"

    async def test_subscribe_before_start_is_in_force_when_start_fires(self) -> None:
        state = RedisState.from_url(reactor, self.server.url(self.prefix))
        self.addCleanup(state.stop)
        inbox = Inbox()
        state.subscribe("early", inbox)
        await state.start()
        publisher = await self.new_state()
        await publisher.publish("early", b"hello")
        assert await inbox.next() == b"hello"

    async def test_bus_and_commands_survive_dropped_connections(self) -> None:
        state = await self.new_state()
        inbox = Inbox()
        state.subscribe("resilient", inbox)
        await state.settled()
        assert await state.incr("before") == 1
        killed = self.server.command("CLIENT", "KILL", "TYPE", "pubsub")
        killed += self.server.command("CLIENT", "KILL", "TYPE", "normal")
        assert killed >= 2
        # reconnecting takes real time (a fraction of a second): retry until it is back
        for attempt in range(100):
            try:
                await state.publish("resilient", b"after %d" % attempt)
                message = await inbox.next(timeout=0.2)
            except (txredisapi.ConnectionError, TimeoutError, CancelledError):
                await deferLater(reactor, 0.05, lambda: None)
                continue
            break
        else:
            self.fail("the bus did not come back")
        assert message.startswith(b"after ")
        assert await state.incr("before") == 2

    async def test_credentials_and_database_from_the_url(self) -> None:
        user = f"user{self.prefix[:-1].replace('.', '_')}"
        self.server.command("ACL", "SETUSER", user, "on", ">s3cret:/@", "~*", "&*", "+@all")
        self.addCleanup(self.server.command, "ACL", "DELUSER", user)
        url = f"redis://{user}:s3cret%3A%2F%40@127.0.0.1:{self.server.port}/3?prefix={self.prefix}"
        state = RedisState.from_url(reactor, url)
        self.addCleanup(state.stop)
        await state.start()
        assert await state.incr("in-db-3") == 1
        assert self.server.command("GET", self.prefix + "in-db-3", db=3) == b"1"
        assert self.server.command("EXISTS", self.prefix + "in-db-3") == 0

    async def test_connection_lost_during_auth_keeps_reconnecting(self) -> None:
        user = f"slow{self.prefix[:-1].replace('.', '_')}"
        self.server.command("ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all")
        self.addCleanup(self.server.command, "ACL", "DELUSER", user)
        # the server answers nothing for a while: AUTH times out and the connection is dropped
        self.server.command("CLIENT", "PAUSE", 800, "ALL")
        url = f"redis://{user}:pw@127.0.0.1:{self.server.port}/0?timeout=0.3&prefix={self.prefix}"
        state = RedisState.from_url(reactor, url)
        self.addCleanup(state.stop)
        starting = state.start()
        starting.addTimeout(10, reactor)
        await starting
        assert await state.incr("after-pause") == 1

    async def test_wrong_password_fails_start(self) -> None:
        url = f"redis://nobody-{self.prefix[:-1]}:wrong@127.0.0.1:{self.server.port}/0"
        state = RedisState.from_url(reactor, url)
        self.addCleanup(state.stop)
        with self.assertRaises(ValueError) as caught:
            await state.start()
        assert "auth" in str(caught.exception)

    async def test_commands_time_out_while_redis_is_unreachable(self) -> None:
        closed = _closed_port()
        state = RedisState.from_url(reactor, f"redis://127.0.0.1:{closed}/0?timeout=0.3")
        starting = state.start()
        with self.assertRaises(TimeoutError):
            await state.take_all([("k", 1)], 60)
        with self.assertRaises(TimeoutError):
            await state.publish("c", b"m")
        assert not starting.called
        await state.stop()
        with self.assertRaises(CancelledError):
            await starting

    def test_from_url_rejects_bad_urls(self) -> None:
        for url in ["http://127.0.0.1:6379/0", "redis://127.0.0.1/zero",
                    "redis://127.0.0.1/0?prefx=a"]:
            with self.assertRaises(ValueError):
                RedisState.from_url(reactor, url)

    async def test_stop_before_connecting_is_clean(self) -> None:
        unused = RedisState.from_url(reactor, self.server.url(self.prefix))
        await unused.stop()
        started = await self.new_state()
        await started.stop()
