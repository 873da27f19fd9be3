"""Routing (§5): ordering, failover groups, algorithms with shared counters, health, failover."""

from __future__ import annotations

import random

import pytest
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway import routing
from gateway.channels.health import ChannelHealth
from gateway.routing import (
    CONNECT_FAILED,
    INVALID_RESPONSE,
    NO_RESPONSE,
    REQUEST_UNBUILDABLE,
    STATUS,
    Candidate,
    Deadline,
    Outcome,
    UserChannelInfo,
)
from gateway.state.memory import MemoryState


def cand(channel_id: int, user_channel_id: int = 1, priority: int = 1, weight: int = 1,
         config_id: int | None = None) -> Candidate:
    return Candidate(config_id=config_id if config_id is not None else channel_id * 10,
                     channel_id=channel_id, user_channel_id=user_channel_id,
                     priority=priority, weight=weight, channel_type="compat",
                     base_url=f"http://127.0.0.1:{9000 + channel_id}",
                     upstream_model="m")


def ids(attempts: list[Candidate]) -> list[int]:
    return [c.channel_id for c in attempts]


class RoutingTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.state = MemoryState(self.clock)
        self.user_channels = {
            1: UserChannelInfo(1, "priority"),
            2: UserChannelInfo(2, "round_robin"),
            3: UserChannelInfo(3, "weighted_round_robin"),
        }

    async def plan(self, candidates, allowed=(), model="gpt", available=None, user_channels=None):
        return await routing.plan(
            candidates, user_channels or self.user_channels, model=model,
            allowed_user_channels=list(allowed), counter=self.state.incr, available=available)

    async def test_order_priority_weight_id(self) -> None:
        candidates = [cand(5, priority=1, weight=9), cand(3, priority=2, weight=1),
                      cand(4, priority=2, weight=5), cand(1, priority=2, weight=5),
                      cand(2, priority=0, weight=100)]
        assert ids(await self.plan(candidates)) == [1, 4, 3, 5, 2]

    async def test_config_id_breaks_ties_within_one_channel(self) -> None:
        candidates = [cand(1, config_id=12), cand(1, config_id=11)]
        assert [c.config_id for c in await self.plan(candidates)] == [11, 12]

    async def test_empty(self) -> None:
        assert await self.plan([]) == []
        assert await self.plan([], allowed=[1, 2]) == []

    async def test_groups_follow_key_order_when_two_or_more(self) -> None:
        candidates = [cand(1, 1, priority=9), cand(2, 1, priority=1), cand(3, 3, priority=5),
                      cand(4, 2, priority=3)]
        self.user_channels[2] = UserChannelInfo(2, "priority")
        self.user_channels[3] = UserChannelInfo(3, "priority")
        assert ids(await self.plan(candidates, allowed=[3, 1, 2])) == [3, 1, 2, 4]
        assert ids(await self.plan(candidates, allowed=[2, 1, 3])) == [4, 1, 2, 3]

    async def test_single_listed_user_channel_is_one_group(self) -> None:
        candidates = [cand(1, 1, priority=1), cand(2, 2, priority=5)]
        self.user_channels[2] = UserChannelInfo(2, "priority")
        assert ids(await self.plan(candidates, allowed=[1])) == [2, 1]
        assert ids(await self.plan(candidates)) == [2, 1]

    async def test_listed_user_channel_without_candidates_is_skipped(self) -> None:
        candidates = [cand(1, 1), cand(2, 3)]
        self.user_channels[3] = UserChannelInfo(3, "priority")
        assert ids(await self.plan(candidates, allowed=[2, 3, 1])) == [2, 1]

    async def test_duplicate_key_entries_do_not_duplicate_attempts(self) -> None:
        candidates = [cand(1, 1), cand(2, 3)]
        self.user_channels[3] = UserChannelInfo(3, "priority")
        assert ids(await self.plan(candidates, allowed=[3, 3, 1])) == [2, 1]
        assert ids(await self.plan([cand(1), cand(1)])) == [1]

    async def test_priority_algorithm_always_first(self) -> None:
        candidates = [cand(1), cand(2), cand(3)]
        for _ in range(4):
            assert ids(await self.plan(candidates)) == [1, 2, 3]

    async def test_round_robin_rotates_with_in_group_failover(self) -> None:
        candidates = [cand(1, 2), cand(2, 2), cand(3, 2)]
        plans = [ids(await self.plan(candidates)) for _ in range(4)]
        assert plans == [[1, 2, 3], [2, 1, 3], [3, 1, 2], [1, 2, 3]]

    async def test_round_robin_counter_per_user_channel_and_model(self) -> None:
        candidates = [cand(1, 2), cand(2, 2)]
        assert ids(await self.plan(candidates, model="a"))[0] == 1
        assert ids(await self.plan(candidates, model="b"))[0] == 1
        assert ids(await self.plan(candidates, model="a"))[0] == 2
        self.user_channels[4] = UserChannelInfo(4, "rr")
        other = [cand(5, 4), cand(6, 4)]
        assert ids(await self.plan(other, model="a"))[0] == 5

    async def test_round_robin_counter_shared_across_planners(self) -> None:
        # two nodes share one SharedState: the rotation continues across them
        candidates = [cand(1, 2), cand(2, 2)]
        first = await routing.plan(candidates, self.user_channels, model="gpt",
                                   allowed_user_channels=[], counter=self.state.incr)
        second = await routing.plan(candidates, self.user_channels, model="gpt",
                                    allowed_user_channels=[], counter=self.state.incr)
        assert [ids(first)[0], ids(second)[0]] == [1, 2]

    async def test_weighted_round_robin_distribution_and_walk_order(self) -> None:
        candidates = [cand(1, 3, weight=3), cand(2, 3, weight=1), cand(3, 3, weight=0)]
        picks = [ids(await self.plan(candidates))[0] for _ in range(10)]
        # order is weight desc: 1 (3), 2 (1), 3 (0 counts as 1); total 5
        assert picks == [1, 1, 1, 2, 3, 1, 1, 1, 2, 3]
        assert ids(await self.plan(candidates)) == [1, 2, 3]

    async def test_weighted_index_negative_weights(self) -> None:
        group = [cand(1, weight=-5), cand(2, weight=2)]
        assert [routing.weighted_index(group, t) for t in range(6)] == [0, 1, 1, 0, 1, 1]

    async def test_each_group_uses_its_own_algorithm(self) -> None:
        candidates = [cand(1, 1), cand(2, 1), cand(3, 2), cand(4, 2)]
        plans = [ids(await self.plan(candidates, allowed=[2, 1])) for _ in range(3)]
        assert plans == [[3, 4, 1, 2], [4, 3, 1, 2], [3, 4, 1, 2]]

    async def test_single_group_uses_first_candidates_user_channel_algorithm(self) -> None:
        candidates = [cand(1, 2, priority=5), cand(2, 1, priority=1), cand(3, 2, priority=1)]
        plans = [ids(await self.plan(candidates)) for _ in range(3)]
        assert [p[0] for p in plans] == [1, 2, 3]

    async def test_unknown_user_channel_or_algorithm_is_priority(self) -> None:
        candidates = [cand(1, 7), cand(2, 7)]
        for _ in range(3):
            assert ids(await self.plan(candidates))[0] == 1
        weird = {7: UserChannelInfo(7, "fastest")}
        for _ in range(3):
            assert ids(await self.plan(candidates, user_channels=weird))[0] == 1

    async def test_priority_does_not_touch_counters(self) -> None:
        calls = []

        async def counter(key: str) -> int:
            calls.append(key)
            return 1

        await routing.plan([cand(1), cand(2)], self.user_channels, model="m",
                           allowed_user_channels=[], counter=counter)
        await routing.plan([cand(3, 2)], self.user_channels, model="m",
                           allowed_user_channels=[], counter=counter)
        assert calls == []
        await routing.plan([cand(3, 2), cand(4, 2)], self.user_channels, model="m",
                           allowed_user_channels=[], counter=counter)
        assert calls == ["lockgate:route:round_robin:2:m"]

    async def test_cooling_channels_are_skipped(self) -> None:
        health = ChannelHealth(self.clock, failures_before_cooldown=1, cooldown_seconds=30)
        health.record_failure(1, "timeout")
        candidates = [cand(1), cand(2), cand(3)]
        assert ids(await self.plan(candidates, available=health.is_available)) == [2, 3]
        self.clock.advance(30)
        assert ids(await self.plan(candidates, available=health.is_available)) == [1, 2, 3]

    async def test_all_cooling_still_tried_in_order(self) -> None:
        health = ChannelHealth(self.clock, failures_before_cooldown=1, cooldown_seconds=30)
        for channel_id in (1, 2):
            health.record_failure(channel_id, "timeout")
        assert ids(await self.plan([cand(2), cand(1)], available=health.is_available)) == [1, 2]

    async def test_round_robin_skips_cooling_members(self) -> None:
        health = ChannelHealth(self.clock, failures_before_cooldown=1, cooldown_seconds=30)
        health.record_failure(2, "timeout")
        candidates = [cand(1, 2), cand(2, 2), cand(3, 2)]
        picks = [ids(await self.plan(candidates, available=health.is_available))
                 for _ in range(4)]
        assert picks == [[1, 3], [3, 1], [1, 3], [3, 1]]

    async def test_a_tuples_kept_order_is_the_computed_one(self) -> None:
        rng = random.Random(5)
        health = ChannelHealth(self.clock, failures_before_cooldown=1, cooldown_seconds=30)
        for _ in range(300):
            tuple_ = tuple(cand(rng.randint(1, 6), rng.randint(1, 3), rng.randint(0, 2),
                                rng.randint(0, 3), config_id=rng.randint(1, 12))
                           for _ in range(rng.randint(1, 6)))
            allowed = rng.choice([(), (1,), (2, 1), (3, 1, 2)])
            if rng.random() < 0.3:
                health.record_failure(rng.randint(1, 6), "timeout")
            if rng.random() < 0.3:
                self.clock.advance(31)
            for _ in range(2):  # the second plan of the same tuple is served from the cache
                kept = await self.plan(tuple_, allowed, available=health.is_available)
                self.state = MemoryState(self.clock)  # same counters for both sides
                computed = await self.plan(list(tuple_), allowed, available=health.is_available)
                self.state = MemoryState(self.clock)
                assert kept == computed, (tuple_, allowed)

    async def test_a_channel_cooling_after_its_tuple_was_planned_is_skipped_at_once(self) -> None:
        health = ChannelHealth(self.clock, failures_before_cooldown=1, cooldown_seconds=30)
        candidates = (cand(1), cand(2), cand(3))
        assert ids(await self.plan(candidates, available=health.is_available)) == [1, 2, 3]
        health.record_failure(1, "timeout")
        assert ids(await self.plan(candidates, available=health.is_available)) == [2, 3]
        self.clock.advance(30)
        assert ids(await self.plan(candidates, available=health.is_available)) == [1, 2, 3]

    async def test_a_reloaded_tuple_is_ordered_anew(self) -> None:
        assert ids(await self.plan((cand(1, priority=2), cand(2, priority=1)))) == [1, 2]
        assert ids(await self.plan((cand(1, priority=1), cand(2, priority=2)))) == [2, 1]
        same = (cand(1), cand(2, 2))
        assert ids(await self.plan(same, allowed=(2, 1))) == [2, 1]
        assert ids(await self.plan(same, allowed=(1, 2))) == [1, 2]

    def test_normalise_algorithm(self) -> None:
        for name in ("round_robin", "roundrobin", "rr", " RR "):
            assert routing.normalise_algorithm(name) == routing.ROUND_ROBIN
        for name in ("weighted_round_robin", "weighted", "weighted_roundrobin", "WRR"):
            assert routing.normalise_algorithm(name) == routing.WEIGHTED_ROUND_ROBIN
        for name in ("priority", "", None, "random"):
            assert routing.normalise_algorithm(name) == routing.PRIORITY

    def test_first_group(self) -> None:
        attempts = [cand(1, 2), cand(2, 2), cand(3, 1), cand(4, 2)]
        assert ids(routing.first_group(attempts)) == [1, 2]
        assert routing.first_group([]) == []


@pytest.mark.parametrize(("outcome", "expected"), [
    (Outcome(CONNECT_FAILED), True),
    (Outcome(NO_RESPONSE), True),
    (Outcome(REQUEST_UNBUILDABLE), True),
    (Outcome(STATUS, 429), True),
    (Outcome(STATUS, 500), True),
    (Outcome(STATUS, 502), True),
    (Outcome(STATUS, 503), True),
    (Outcome(STATUS, 504), False),
    (Outcome(STATUS, 400), False),
    (Outcome(STATUS, 401), True),
    (Outcome(STATUS, 403), True),
    (Outcome(STATUS, 404), False),
    (Outcome(STATUS, 422), False),
    (Outcome(INVALID_RESPONSE, 200), False),
    (Outcome(CONNECT_FAILED, client_bytes_sent=True), False),
    (Outcome(STATUS, 503, client_bytes_sent=True), False),
    (Outcome(NO_RESPONSE, task_accepted=True), False),
    (Outcome(STATUS, 500, task_accepted=True), False),
])
def test_retryable(outcome, expected):
    assert routing.retryable(outcome) is expected


def test_deadline():
    clock = Clock()
    clock.advance(100)
    deadline = Deadline(clock, 30)
    assert deadline.remaining() == 30 and not deadline.expired()
    assert deadline.timeout(10) == 10
    clock.advance(25)
    assert deadline.timeout(10) == 5
    clock.advance(5)
    assert deadline.expired() and deadline.timeout(10) == 0
    clock.advance(5)
    assert deadline.remaining() == 0
