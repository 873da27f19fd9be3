"""A subscription's quota at a given moment, and how a charge is split across quotas.

Pure arithmetic (no I/O) so settlement and the console agree on one rule set (console contract
§6.1): a subscription is active until ``active_until`` (``None`` = forever); when its
``next_reset_at`` has passed, the quota is *set* back to the plan's ``reset_amount`` (unused
quota does not carry over) and ``next_reset_at`` advances in whole steps of
``reset_interval_days`` until it is in the future -- unless the plan is disabled, which stops
refills.  A charge drains active subscriptions first -- expiring soonest first, never-expiring
last, then by id (an explicit order, contract weakness 20) -- and the wallet pays the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Quota:
    """One user subscription as settlement sees it."""

    id: int
    balance_nanos: int
    next_reset_at: datetime
    active_until: datetime | None
    last_reset_at: datetime | None
    reset_amount_nanos: int
    reset_interval_days: int
    plan_enabled: bool = True

    def active(self, now: datetime) -> bool:
        return self.active_until is None or self.active_until > now


def current(quota: Quota, now: datetime) -> Quota:
    """``quota`` with every reset due by ``now`` applied (the same object when none is due)."""
    if quota.next_reset_at > now or not quota.plan_enabled or quota.reset_interval_days <= 0:
        return quota
    step = timedelta(days=quota.reset_interval_days)
    # the last reset boundary at or before now, and the first one after it
    steps = (now - quota.next_reset_at) // step
    last = quota.next_reset_at + step * steps
    return replace(quota, balance_nanos=quota.reset_amount_nanos, last_reset_at=last,
                   next_reset_at=last + step)


def spending_order(quotas: Iterable[Quota]) -> list[Quota]:
    """Expiring soonest first, never-expiring last, then by id."""
    return sorted(quotas, key=lambda q: (q.active_until is None,
                                         q.active_until or datetime.min, q.id))


def remaining(quotas: Iterable[Quota], now: datetime) -> int:
    """The quota a user can spend now across active subscriptions (resets applied)."""
    return sum(max(0, current(q, now).balance_nanos) for q in quotas if q.active(now))


def split(cost_nanos: int, quotas: Sequence[Quota]) -> tuple[list[tuple[int, int]], int]:
    """Take ``cost`` from ``quotas`` in the given order: ([(quota id, taken)], rest for wallet).

    ``quotas`` must already be current, active and in spending order.
    """
    left = max(0, cost_nanos)
    taken: list[tuple[int, int]] = []
    for quota in quotas:
        if left <= 0:
            break
        take = min(left, max(0, quota.balance_nanos))
        if take:
            taken.append((quota.id, take))
            left -= take
    return taken, left
