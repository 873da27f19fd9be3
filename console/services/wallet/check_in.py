"""Daily check-in rules (console contract §4.6): dates, streaks, random bonus, the reward.

"Today" is the calendar date in ``checkin_timezone`` at the context clock's time, so tests move
days with a ``Clock``.  The random part is drawn with ``secrets`` (a CSPRNG: users cannot
predict or steer it) in whole cents within [min, max].  The reward is computed from the streak
inside the database transaction that records it (``gateway.store.check_ins``), so concurrent
check-ins cannot both see "no check-in yet".
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from console.http import ApiError
from gateway.billing.money import format_nanos, to_nanos
from gateway.settings.store import Settings

CENT = Decimal("0.01")


def _amount(text: Any) -> Decimal:
    try:
        value = Decimal(str(text).strip())
    except (InvalidOperation, ValueError):
        return Decimal(0)
    return value if value.is_finite() and value >= 0 else Decimal(0)


@dataclass(frozen=True)
class CheckInConfig:
    enabled: bool
    daily: Decimal
    timezone: str
    streak_enabled: bool
    cycle_days: int
    #: streak day -> bonus
    streak_rewards: dict[int, Decimal] = field(default_factory=dict)
    random_enabled: bool = False
    random_min: Decimal = Decimal(0)
    random_max: Decimal = Decimal(0)
    currency: str = "$"

    @classmethod
    def from_settings(cls, settings: Settings) -> CheckInConfig:
        rewards: dict[int, Decimal] = {}
        raw = settings.json("checkin_streak_rewards", {})
        if isinstance(raw, dict):
            for day, amount in raw.items():
                if str(day).strip().isdigit() and not isinstance(amount, bool):
                    rewards[int(str(day).strip())] = _amount(amount)
        return cls(
            enabled=settings.flag("checkin_enabled"),
            daily=_amount(settings.text("checkin_daily_reward")),
            timezone=settings.text("checkin_timezone") or "Asia/Shanghai",
            streak_enabled=settings.flag("checkin_streak_enabled"),
            cycle_days=max(1, settings.integer("checkin_streak_cycle_days", 7)),
            streak_rewards=rewards,
            random_enabled=settings.flag("checkin_random_enabled"),
            random_min=_amount(settings.text("checkin_random_min")),
            random_max=_amount(settings.text("checkin_random_max")),
            currency=settings.text("payment_currency_display_name"),
        )

    def today(self, now: datetime) -> date:
        try:
            zone = ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ApiError(500, "Invalid check-in timezone") from None
        return now.astimezone(zone).date()

    @property
    def random_on(self) -> bool:
        return (self.random_enabled and self.random_max >= self.random_min
                and self.random_max > 0)

    def streak_bonus(self, streak: int) -> Decimal:
        if not self.streak_enabled or streak <= 0:
            return Decimal(0)
        return self.streak_rewards.get((streak - 1) % self.cycle_days + 1, Decimal(0))

    def draw_random(self) -> Decimal:
        """Uniform in whole cents within [min, max] (CSPRNG)."""
        low = int((self.random_min / CENT).to_integral_value(rounding=ROUND_CEILING))
        high = int((self.random_max / CENT).to_integral_value(rounding=ROUND_FLOOR))
        if high < low:
            return Decimal(0)
        return (low + secrets.randbelow(high - low + 1)) * CENT

    def preview(self) -> Decimal:
        return self.daily + (self.random_min if self.random_on else Decimal(0))

    def next_streak_reward(self, streak: int) -> dict[str, Any] | None:
        if not self.streak_enabled:
            return None
        days = sorted(d for d, amount in self.streak_rewards.items()
                      if 0 < d <= self.cycle_days and amount > 0)
        if not days:
            return None
        position = streak % self.cycle_days
        upcoming = [d for d in days if d > position] or days
        return {"day": upcoming[0], "amount": format_nanos(to_nanos(
            self.streak_rewards[upcoming[0]]))}

    def rule(self) -> Any:
        """streak -> (reward nanos, kind), with today's random draw fixed up front."""
        extra = self.draw_random() if self.random_on else Decimal(0)

        def reward(streak: int) -> tuple[int, str]:
            bonus = self.streak_bonus(streak)
            kind = "daily" + ("_streak" if bonus > 0 else "") + ("_random" if self.random_on
                                                                   else "")
            return to_nanos(self.daily + bonus + extra), kind

        return reward


def dates(config: CheckInConfig, now: datetime) -> tuple[str, str]:
    """(today, yesterday) as ``YYYY-MM-DD`` in the configured timezone."""
    today = config.today(now)
    return today.isoformat(), (today - timedelta(days=1)).isoformat()


def current_streak(latest: dict[str, Any] | None, today: str, yesterday: str) -> int:
    if latest and latest["check_in_date"] in (today, yesterday):
        return int(latest["streak_days"])
    return 0


def record_view(row: dict[str, Any]) -> dict[str, Any]:
    return {"check_in_date": row["check_in_date"],
            "reward_amount": format_nanos(row["reward_amount_nanos"]),
            "streak_days": row["streak_days"], "reward_kind": row["reward_kind"]}
