"""``/api/user/check-in``: rewards, streaks, random bonus, timezone, records and the race."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import select
from twisted.internet.defer import ensureDeferred, gatherResults

from gateway.invalidation import USERS
from gateway.store import schema
from tests.support.app import AppTestCase

DAY = 86400


class CheckInCase(AppTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.announced: list[bytes] = []

        async def record(detail: bytes) -> None:
            self.announced.append(detail)

        self.ctx.invalidation.on(USERS, record)

    async def configure(self, **values: str) -> None:
        rows = {"checkin_enabled": "true", "checkin_daily_reward": "0.1",
                "checkin_timezone": "Asia/Shanghai"}
        rows.update(values)
        await self.ctx.live_settings.save(rows, self.ctx.now())

    async def user(self, name: str = "kim") -> tuple[str, int]:
        await self.setup_admin()
        registered = await self.register(name)
        return registered["token"], registered["user"]["id"]

    async def wallet(self, user_id: int) -> tuple[int, list[dict[str, Any]]]:
        def read(conn: Any) -> tuple[int, list[dict[str, Any]]]:
            balance = conn.execute(select(schema.users.c.balance_nanos).where(
                schema.users.c.id == user_id)).scalar_one()
            rows = [dict(r) for r in conn.execute(select(schema.ledger).where(
                schema.ledger.c.user_id == user_id).order_by(schema.ledger.c.id)).mappings()]
            return int(balance), rows
        return await self.ctx.db.transaction(read)

    async def assert_balance_is_ledger(self, user_id: int) -> int:
        balance, rows = await self.wallet(user_id)
        assert balance == sum(r["amount_nanos"] for r in rows)
        return balance


class CheckInTests(CheckInCase):
    async def test_disabled_refuses_and_changes_nothing(self) -> None:
        token, user_id = await self.user()
        response = await self.call("POST", "/api/user/check-in", token=token)
        assert response.status == 400
        assert response.json()["error"] == "Check-in is disabled"
        assert await self.wallet(user_id) == (0, [])
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert status["enabled"] is False and status["checked_in_today"] is False

    async def test_requires_login(self) -> None:
        assert (await self.call("POST", "/api/user/check-in")).status == 401
        assert (await self.call("GET", "/api/user/check-in/status")).status == 401

    async def test_daily_reward_once_per_day_and_streaks(self) -> None:
        token, user_id = await self.user()
        await self.configure()
        first = await self.call("POST", "/api/user/check-in", token=token)
        assert first.status == 200, first
        body = first.json()
        assert body["reward_amount"] == "0.1" and body["streak_days"] == 1
        assert body["reward_kind"] == "daily" and body["balance"] == "0.1"
        assert body["currency_display_name"] == "$"
        assert str(user_id).encode() in self.announced
        again = await self.call("POST", "/api/user/check-in", token=token)
        assert again.status == 400 and again.json()["error"] == "Already checked in today"
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert status["checked_in_today"] is True and status["current_streak"] == 1
        self.clock.advance(DAY)
        second = (await self.call("POST", "/api/user/check-in", token=token)).json()
        assert second["streak_days"] == 2 and second["balance"] == "0.2"
        self.clock.advance(2 * DAY)  # a day skipped: the streak starts over
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert status["current_streak"] == 0 and status["checked_in_today"] is False
        third = (await self.call("POST", "/api/user/check-in", token=token)).json()
        assert third["streak_days"] == 1
        balance, rows = await self.wallet(user_id)
        assert balance == 300_000_000
        assert [r["kind"] for r in rows] == ["checkin"] * 3
        assert len({r["ref"] for r in rows}) == 3
        assert await self.assert_balance_is_ledger(user_id) == balance

    async def test_streak_bonus_cycle_and_preview(self) -> None:
        token, _ = await self.user()
        await self.configure(checkin_streak_enabled="true", checkin_streak_cycle_days="3",
                             checkin_streak_rewards='{"2": "0.5", "3": 1}')
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert status["next_streak_reward"] == {"day": 2, "amount": "0.5"}
        assert status["today_reward_preview"] == "0.1"
        rewards = []
        for _ in range(4):
            body = (await self.call("POST", "/api/user/check-in", token=token)).json()
            rewards.append((body["streak_days"], body["reward_amount"], body["reward_kind"]))
            self.clock.advance(DAY)
        assert rewards == [(1, "0.1", "daily"), (2, "0.6", "daily_streak"),
                           (3, "1.1", "daily_streak"), (4, "0.1", "daily")]

    async def test_random_bonus_in_whole_cents_within_range(self) -> None:
        token, _ = await self.user()
        await self.configure(checkin_daily_reward="0", checkin_random_enabled="true",
                             checkin_random_min="0.05", checkin_random_max="0.5")
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert status["today_reward_preview"] == "0.05" and status["random_enabled"] is True
        seen = set()
        for _ in range(6):  # within the 7-day session lifetime
            response = await self.call("POST", "/api/user/check-in", token=token)
            assert response.status == 200, response
            body = response.json()
            amount = Decimal(body["reward_amount"])
            assert Decimal("0.05") <= amount <= Decimal("0.5")
            assert amount == amount.quantize(Decimal("0.01"))
            assert body["reward_kind"] == "daily_random"
            seen.add(amount)
            self.clock.advance(DAY)
        assert len(seen) > 1

    async def test_day_boundary_follows_the_configured_timezone(self) -> None:
        token, _ = await self.user()
        await self.configure()
        # the test clock starts at 08:00 UTC = 16:00 in Shanghai; go to 23:59 Shanghai time
        self.clock.advance(7 * 3600 + 59 * 60)
        first = (await self.call("POST", "/api/user/check-in", token=token)).json()
        self.clock.advance(120)  # 00:01 the next day in Shanghai, still the same UTC day
        second = await self.call("POST", "/api/user/check-in", token=token)
        assert second.status == 200, second
        assert second.json()["check_in_date"] != first["check_in_date"]
        assert second.json()["streak_days"] == 2
        await self.configure(checkin_timezone="UTC")
        third = await self.call("POST", "/api/user/check-in", token=token)
        assert third.status == 400  # a later local date is recorded: switching zones pays nothing

    async def test_records_plain_and_envelope(self) -> None:
        token, _ = await self.user()
        await self.configure()
        for _ in range(3):
            await self.call("POST", "/api/user/check-in", token=token)
            self.clock.advance(DAY)
        plain = (await self.call("GET", "/api/user/check-in/records", token=token)).json()
        assert isinstance(plain, list) and len(plain) == 3
        dates = [r["check_in_date"] for r in plain]
        assert dates == sorted(dates, reverse=True)
        page = (await self.call("GET", "/api/user/check-in/records?page=1&page_size=2",
                                token=token)).json()
        assert page["total"] == 3 and len(page["items"]) == 2 and page["page_size"] == 2
        ranged = (await self.call(
            "GET", f"/api/user/check-in/records?from={dates[1]}&to={dates[0]}",
            token=token)).json()
        assert [r["check_in_date"] for r in ranged["items"]] == dates[:2]
        bad = await self.call("GET", "/api/user/check-in/records?from=yesterday", token=token)
        assert bad.status == 400 and bad.json()["error"] == "invalid date format"
        status = (await self.call("GET", "/api/user/check-in/status", token=token)).json()
        assert len(status["recent_records"]) == 3

    async def test_fifty_concurrent_check_ins_reward_once(self) -> None:
        token, user_id = await self.user()
        await self.configure()
        responses = await gatherResults([
            ensureDeferred(self.call("POST", "/api/user/check-in", token=token))
            for _ in range(50)])
        statuses = sorted(r.status for r in responses)
        assert statuses == [200] + [400] * 49, statuses
        assert all(r.json()["error"] == "Already checked in today"
                   for r in responses if r.status == 400)
        balance, rows = await self.wallet(user_id)
        assert balance == 100_000_000 and len(rows) == 1
        count = await self.ctx.db.transaction(lambda conn: len(conn.execute(
            select(schema.check_ins)).all()))
        assert count == 1


class PostgresCheckInTests(CheckInCase):
    backend = "postgresql"

    async def test_fifty_concurrent_check_ins_reward_once(self) -> None:
        await CheckInTests.test_fifty_concurrent_check_ins_reward_once(self)  # type: ignore[arg-type]
