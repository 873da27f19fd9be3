"""Channel health: cooldown after consecutive failures ends on the clock; 401/403 auto-disable."""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import TestCase

from gateway.channels.health import ChannelHealth


class HealthTests(TestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.disabled: list[tuple[int, str]] = []

        async def on_auto_disable(channel_id: int, reason: str) -> None:
            self.disabled.append((channel_id, reason))

        self.health = ChannelHealth(self.clock, failures_before_cooldown=3, cooldown_seconds=30,
                                    on_auto_disable=on_auto_disable)

    def test_unknown_channel_is_available(self) -> None:
        assert self.health.is_available(1)
        assert not self.health.is_cooling(1)
        assert self.health.state(1).consecutive_failures == 0

    def test_cooldown_after_threshold_and_ends_by_itself(self) -> None:
        self.health.record_failure(1, "connect refused")
        self.health.record_failure(1, "connect refused")
        assert self.health.is_available(1)
        self.health.record_failure(1, "upstream 503", 503)
        assert self.health.is_cooling(1) and not self.health.is_available(1)
        assert self.health.is_available(2)  # per channel
        state = self.health.state(1)
        assert state.consecutive_failures == 3
        assert state.last_failure_reason == "upstream 503"
        self.clock.advance(29.9)
        assert self.health.is_cooling(1)
        self.clock.advance(0.1)
        assert not self.health.is_cooling(1)
        assert self.health.is_available(1)

    def test_half_open_after_cooldown(self) -> None:
        for _ in range(3):
            self.health.record_failure(1, "timeout")
        self.clock.advance(30)
        assert self.health.is_available(1)
        self.health.record_failure(1, "timeout")  # one more failure cools again at once
        assert self.health.is_cooling(1)
        self.clock.advance(30)
        self.health.record_success(1)
        self.health.record_failure(1, "timeout")  # success cleared the count
        assert not self.health.is_cooling(1)

    def test_success_resets_consecutive_count(self) -> None:
        self.health.record_failure(1, "x", 500)
        self.health.record_failure(1, "x", 502)
        self.health.record_success(1)
        self.health.record_failure(1, "x", 429)
        self.health.record_failure(1, "x", 500)
        assert not self.health.is_cooling(1)
        self.health.record_failure(1, "x", 500)
        assert self.health.is_cooling(1)

    def test_success_ends_cooldown(self) -> None:
        for _ in range(3):
            self.health.record_failure(1, "x")
        self.health.record_success(1)
        assert not self.health.is_cooling(1)

    def test_caller_faults_do_not_count(self) -> None:
        for status in (400, 404, 409, 413, 422, 400, 400):
            self.health.record_failure(1, "bad request", status)
        assert self.health.is_available(1)
        assert self.health.state(1).consecutive_failures == 0
        assert self.disabled == []

    async def test_credential_failure_auto_disables_once(self) -> None:
        await self.health.record_failure(4, "upstream 401", 401)
        assert self.disabled == [(4, "upstream 401")]
        assert self.health.is_auto_disabled(4) and not self.health.is_available(4)
        await self.health.record_failure(4, "upstream 403", 403)
        assert self.disabled == [(4, "upstream 401")]
        # auto-disable does not end by itself
        self.clock.advance(3600)
        self.health.record_success(4)
        assert self.health.is_auto_disabled(4)
        # an admin re-enabled it
        self.health.reset(4)
        assert self.health.is_available(4)
        await self.health.record_failure(4, "upstream 403", 403)
        assert self.disabled == [(4, "upstream 401"), (4, "upstream 403")]

    async def test_auto_disable_failure_is_logged_and_retried_next_time(self) -> None:
        calls: list[int] = []

        async def broken(channel_id: int, reason: str) -> None:
            calls.append(channel_id)
            raise RuntimeError("database is down")

        health = ChannelHealth(self.clock, on_auto_disable=broken)
        await health.record_failure(5, "upstream 401", 401)  # does not raise
        assert len(self.flushLoggedErrors(RuntimeError)) == 1
        assert not health.is_auto_disabled(5)
        await health.record_failure(5, "upstream 401", 401)
        assert calls == [5, 5]
        assert len(self.flushLoggedErrors(RuntimeError)) == 1

    def test_without_callback_still_marks_locally(self) -> None:
        health = ChannelHealth(self.clock)
        health.record_failure(6, "upstream 401", 401)
        assert health.is_auto_disabled(6)

    def test_state_is_a_copy(self) -> None:
        self.health.record_failure(1, "x")
        self.health.state(1).consecutive_failures = 99
        assert self.health.state(1).consecutive_failures == 1
        assert self.health.state(1).last_failure_at == 0.0
