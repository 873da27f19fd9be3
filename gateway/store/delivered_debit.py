"""Charging for work already done ("delivered usage"), outside the request settler.

Why its own module: a sandbox task (agents contract §3.6) has already run when it is billed,
so its charge is never refused and never rolled back -- subscription quotas pay first (in
``lock_quotas`` spending order), the wallet pays the rest, and when the wallet cannot cover it
the balance stops at 0.  That is the request settler's ``delivered`` rule; this is the same
rule for one charge inside a caller's transaction.  Only the wallet part is a ledger row (as in
``billing_writes``), so the balance always equals the sum of its ledger rows.

Lock order is the settler's: the user's row first (``lock_balance``, ``FOR UPDATE``; SQLite's
``BEGIN IMMEDIATE`` already serialises writers), then their subscriptions.  Callers take the
user lock *before* they read what they are about to bill, so two settlements of one thing
serialise and the second sees the first one's rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.billing.subscriptions import split
from gateway.store import schema
from gateway.store.subscriptions import lock_quotas, save_quotas


@dataclass(frozen=True)
class Debit:
    """What a delivered charge took: from quotas, from the wallet, and the wallet after."""

    quota_nanos: int
    wallet_nanos: int
    balance_after_nanos: int

    @property
    def taken_nanos(self) -> int:
        return self.quota_nanos + self.wallet_nanos


def lock_balance(conn: Connection, user_id: int) -> int | None:
    """The user's wallet balance under the user's billing lock; None when there is no user."""
    u = schema.users
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)
                           .with_for_update()).scalar()
    return None if balance is None else int(balance)


def debit_delivered(conn: Connection, user_id: int, balance_nanos: int, cost_nanos: int, *,
                    kind: str, ref: str, memo: str, now: datetime) -> Debit:
    """Take ``cost_nanos`` from quotas, then the wallet, never below 0.

    ``balance_nanos`` is what ``lock_balance`` returned in this transaction.  The wallet part is
    a ledger row ``(kind, ref)`` -- unique, so one ``ref`` is never debited twice.
    """
    quotas = lock_quotas(conn, [user_id], now).get(user_id, [])
    cost = max(0, cost_nanos)
    charged = min(cost, balance_nanos + sum(max(0, q.balance_nanos) for q in quotas))
    taken, wallet_part = split(charged, quotas)
    if taken:
        spent = dict(taken)
        save_quotas(conn, [replace(q, balance_nanos=q.balance_nanos - spent[q.id])
                           for q in quotas if q.id in spent], now)
    after = balance_nanos - wallet_part
    if wallet_part:
        u = schema.users
        conn.execute(update(u).where(u.c.id == user_id).values(
            balance_nanos=u.c.balance_nanos - wallet_part))
        conn.execute(schema.ledger.insert().values(
            user_id=user_id, kind=kind, amount_nanos=-wallet_part, balance_after_nanos=after,
            actor_user_id=None, ref=ref, memo=memo[:200], created_at=now))
    return Debit(quota_nanos=charged - wallet_part, wallet_nanos=wallet_part,
                 balance_after_nanos=after)
