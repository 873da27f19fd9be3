"""Committed money of one caller, for the /v1 balance routes (gateway contract §11).

These read the database, not the wallet's in-memory reservations: a balance route shows money
that has been settled.  One small query each, never on the metered path.
"""

from __future__ import annotations

from typing import NamedTuple

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gateway.store import schema


class KeyQuota(NamedTuple):
    """An API key's quota (``0`` or less: unlimited) and what it has spent, in nanos."""

    limit_nanos: int
    spent_nanos: int


class WalletTotals(NamedTuple):
    """A user's balance and the sum of every usage cost ever logged, in nanos."""

    balance_nanos: int
    used_nanos: int


def key_quota(conn: Connection, key_id: int) -> KeyQuota:
    """The key's quota and spending; zeros for a key that is gone."""
    keys = schema.api_keys
    row = conn.execute(select(keys.c.quota_limit_nanos, keys.c.spent_nanos)
                       .where(keys.c.id == key_id)).first()
    return KeyQuota(row[0], row[1]) if row else KeyQuota(0, 0)


def wallet_totals(conn: Connection, user_id: int) -> WalletTotals:
    """The user's balance and usage total; zeros for a user that is gone."""
    balance = conn.execute(select(schema.users.c.balance_nanos)
                           .where(schema.users.c.id == user_id)).scalar() or 0
    used = conn.execute(select(func.coalesce(func.sum(schema.usage_logs.c.cost_nanos), 0))
                        .where(schema.usage_logs.c.user_id == user_id)).scalar() or 0
    return WalletTotals(int(balance), int(used))
