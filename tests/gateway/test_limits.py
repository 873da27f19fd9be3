"""Global (§4.1) and per-user-channel (§4.2) limiters over MemoryState with a Clock."""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.limits import (
    ADMIT,
    KEYS_KEPT,
    GatewayLimiter,
    UserChannelLimit,
    Verdict,
    global_identity,
)
from gateway.settings.store import Settings
from gateway.state.memory import MemoryState
from gateway.state.protocol import WindowVerdict


class GlobalLimiterTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.clock.advance(1000)
        self.state = MemoryState(self.clock)
        self.settings = Settings({"rate_limit_requests_per_minute": "2", "rate_limit_burst": "1"})
        self.limiter = GatewayLimiter(self.state, self.settings)

    async def allowed(self, identity: str, times: int) -> list[bool]:
        return [(await self.limiter.check_global(identity)).allowed for _ in range(times)]

    def test_defaults_are_60_plus_10(self) -> None:
        assert GatewayLimiter(self.state, Settings()).global_capacity() == 70

    async def test_capacity_is_rpm_plus_burst_then_429(self) -> None:
        assert await self.allowed("key:1", 3) == [True, True, True]
        verdict = await self.limiter.check_global("key:1")
        assert not verdict.allowed
        assert verdict.error is not None and verdict.error.status == 429
        assert verdict.error.message == "Rate limit exceeded"
        assert verdict.error.extra == {"retry_after": 60}
        assert verdict.headers == {"Retry-After": "60"}
        assert "X-RateLimit-Limit" not in verdict.headers

    async def test_admitted_verdict_has_no_headers(self) -> None:
        verdict = await self.limiter.check_global("key:1")
        assert verdict.allowed and verdict.headers == {} and verdict.error is None

    async def test_fixed_window_opens_on_first_request_and_resets(self) -> None:
        await self.allowed("key:1", 3)
        self.clock.advance(45)
        verdict = await self.limiter.check_global("key:1")
        assert verdict.headers == {"Retry-After": "15"}
        self.clock.advance(15)
        assert await self.allowed("key:1", 3) == [True, True, True]

    async def test_refused_calls_consume_the_window(self) -> None:
        await self.allowed("key:1", 5)  # 3 admitted, 2 refused
        # raising the limit mid-window: the refused calls counted too (5 used of 5)
        self.settings.replace({"rate_limit_requests_per_minute": "4", "rate_limit_burst": "1"})
        assert await self.allowed("key:1", 1) == [False]

    async def test_identities_are_separate(self) -> None:
        await self.allowed("key:1", 4)
        assert await self.allowed("key:2", 1) == [True]
        assert await self.allowed("user:1", 1) == [True]
        assert await self.allowed("ip:127.0.0.1", 1) == [True]

    def test_identity_preference(self) -> None:
        assert global_identity(7, 3, "10.0.0.1") == "key:7"
        assert global_identity(None, 3, "10.0.0.1") == "user:3"
        assert global_identity(None, None, "10.0.0.1") == "ip:10.0.0.1"
        assert global_identity(0, None, "x") == "key:0"

    async def test_disabled_by_flag_or_rpm(self) -> None:
        self.settings.replace({"rate_limit_enabled": "false", "rate_limit_requests_per_minute": "1"})
        assert await self.allowed("key:1", 20) == [True] * 20
        self.settings.replace({"rate_limit_requests_per_minute": "0", "rate_limit_burst": "5"})
        assert self.limiter.global_capacity() == 0
        assert await self.allowed("key:1", 20) == [True] * 20
        self.settings.replace({"rate_limit_requests_per_minute": "-3"})
        assert await self.allowed("key:1", 20) == [True] * 20

    async def test_settings_changes_apply_without_rebuilding(self) -> None:
        self.settings.replace({"rate_limit_requests_per_minute": "1", "rate_limit_burst": "0"})
        assert await self.allowed("key:9", 2) == [True, False]

    async def test_shared_between_limiters_on_one_state(self) -> None:
        # two "processes" sharing one store share one window
        other = GatewayLimiter(self.state, self.settings)
        await self.allowed("key:1", 2)
        assert (await other.check_global("key:1")).allowed
        assert not (await other.check_global("key:1")).allowed
        assert not (await self.limiter.check_global("key:1")).allowed


class UserChannelLimiterTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.state = MemoryState(self.clock)
        self.limiter = GatewayLimiter(self.state, Settings())
        self.limit = UserChannelLimit(user_channel_id=4, enabled=True, requests_per_minute=2,
                                      burst=1)

    async def test_headers_and_refusal_body(self) -> None:
        seen = []
        for _ in range(3):
            verdict = await self.limiter.check_user_channel(10, self.limit)
            assert verdict.allowed and verdict.error is None
            seen.append(verdict.headers)
        assert seen == [
            {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2"},
            {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "1"},
            {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0"},
        ]
        self.clock.advance(20)
        refused = await self.limiter.check_user_channel(10, self.limit)
        assert not refused.allowed
        assert refused.headers == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0",
                                   "Retry-After": "40"}
        error = refused.error
        assert error is not None and error.status == 429
        assert error.message == "User channel rate limit exceeded"
        assert error.type == "user_channel_rate_limit"
        assert error.extra == {"retry_after": 40, "channel_id": 4}

    async def test_only_admitted_requests_count(self) -> None:
        for _ in range(3):
            await self.limiter.check_user_channel(10, self.limit)
        for _ in range(5):
            assert not (await self.limiter.check_user_channel(10, self.limit)).allowed
        self.clock.advance(60)
        # the refused calls did not extend or fill the next window
        for _ in range(3):
            assert (await self.limiter.check_user_channel(10, self.limit)).allowed
        assert not (await self.limiter.check_user_channel(10, self.limit)).allowed

    async def test_per_user_and_per_user_channel(self) -> None:
        for _ in range(3):
            await self.limiter.check_user_channel(10, self.limit)
        assert (await self.limiter.check_user_channel(11, self.limit)).allowed
        other_channel = UserChannelLimit(5, True, 2, 1)
        assert (await self.limiter.check_user_channel(10, other_channel)).allowed

    async def test_inactive_limit_admits_without_headers(self) -> None:
        for limit in (UserChannelLimit(4, False, 1, 0), UserChannelLimit(4, True, 0, 5),
                      UserChannelLimit(4, True, -1, 0)):
            for _ in range(10):
                verdict = await self.limiter.check_user_channel(10, limit)
                assert verdict.allowed and verdict.headers == {}

    def test_capacity(self) -> None:
        assert UserChannelLimit(1, True, 60, 10).capacity == 70
        assert UserChannelLimit(1, True, 60, -5).capacity == 60
        assert UserChannelLimit(1, False, 60, 10).capacity == 0

    async def test_global_and_user_channel_windows_are_independent(self) -> None:
        limiter = GatewayLimiter(self.state, Settings({"rate_limit_requests_per_minute": "1",
                                                       "rate_limit_burst": "0"}))
        assert (await limiter.check_global("user:10")).allowed
        assert not (await limiter.check_global("user:10")).allowed
        assert (await limiter.check_user_channel(10, self.limit)).allowed


class _ThroughTheProtocol:
    """A real ``MemoryState`` seen only through ``SharedState``'s Deferred methods, as the
    limiter sees Redis: the path every state other than this process's memory takes."""

    shared_across_processes = False

    def __init__(self, state: MemoryState) -> None:
        self._state = state

    def hit(self, key: str, limit: int, window_seconds: int) -> Deferred[WindowVerdict]:
        return self._state.hit(key, limit, window_seconds)

    def take_all(self, limits: Sequence[tuple[str, int]],
                 window_seconds: int) -> Deferred[WindowVerdict]:
        return self._state.take_all(limits, window_seconds)


class MemoryFastPathTests(TestCase):
    """Over ``MemoryState`` the limiter asks the windows directly; the verdicts must be the
    ones the Deferred path gives, call for call."""

    def limiter(self, direct: bool) -> tuple[GatewayLimiter, Clock]:
        clock = Clock()
        clock.advance(1000)
        state = MemoryState(clock)
        settings = Settings({"rate_limit_requests_per_minute": "3", "rate_limit_burst": "1"})
        shared = state if direct else _ThroughTheProtocol(state)
        return GatewayLimiter(shared, settings), clock  # type: ignore[arg-type]

    @staticmethod
    def seen(verdict: Verdict) -> tuple[object, ...]:
        error = verdict.error
        return (verdict.allowed, verdict.headers,
                None if error is None else (error.status, error.type, error.extra))

    async def script(self, limiter: GatewayLimiter, clock: Clock) -> list[tuple[object, ...]]:
        limits = [UserChannelLimit(4, True, 2, 1), UserChannelLimit(5, True, 1, 0)]
        out = []
        for step in range(40):
            out.append(self.seen(await limiter.check_global(f"key:{step % 3}")))
            out.append(self.seen(await limiter.check_user_channel(step % 2, limits[step % 2])))
            clock.advance(7 if step % 5 else 13)
        return out

    async def test_the_direct_answers_are_the_protocols(self) -> None:
        direct, direct_clock = self.limiter(direct=True)
        assert direct._memory is not None  # the fast path is the one under test
        through, through_clock = self.limiter(direct=False)
        assert through._memory is None
        expected = await self.script(through, through_clock)
        assert await self.script(direct, direct_clock) == expected
        assert any(not allowed for allowed, _, _ in expected)  # refusals were compared too

    async def test_formatted_keys_are_bounded(self) -> None:
        limiter, _clock = self.limiter(direct=True)
        for user in range(KEYS_KEPT + 5):
            await limiter.check_global(f"user:{user}")
            await limiter.check_user_channel(user, UserChannelLimit(4, True, 2, 1))
        assert len(limiter._global_keys) <= KEYS_KEPT
        assert len(limiter._channel_keys) <= KEYS_KEPT


class ImmediateVerdictTests(MemoryFastPathTests):
    """``check_global_now`` / ``check_user_channel_now`` (the /v1 path's way in): over
    ``MemoryState`` the same verdicts as the Deferred path, call for call; over any other
    state None, so that the caller awaits the shared windows."""

    async def script(self, limiter: GatewayLimiter, clock: Clock) -> list[tuple[object, ...]]:
        if limiter._memory is None:
            return await super().script(limiter, clock)
        limits = [UserChannelLimit(4, True, 2, 1), UserChannelLimit(5, True, 1, 0)]
        out = []
        for step in range(40):
            found = limiter.check_global_now(f"key:{step % 3}")
            assert found is not None
            out.append(self.seen(found))
            found = limiter.check_user_channel_now(step % 2, limits[step % 2])
            assert found is not None
            out.append(self.seen(found))
            clock.advance(7 if step % 5 else 13)
        return out

    def test_off_limits_admit_at_once_and_shared_windows_are_awaited(self) -> None:
        direct, _clock = self.limiter(direct=True)
        assert direct.check_user_channel_now(1, UserChannelLimit(4, False, 1, 0)) is ADMIT
        through, _clock = self.limiter(direct=False)
        assert through.check_global_now("key:1") is None
        assert through.check_user_channel_now(1, UserChannelLimit(4, True, 2, 1)) is None
