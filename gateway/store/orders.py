"""Top-up orders and their state machine: pending -> paid | expired | failed.

Why every transition is a conditional UPDATE (``... WHERE status = 'pending'``): a provider may
deliver the same notification many times, from several connections at once, while the expiry job
closes old orders on another node.  Exactly one of those writers can move a pending order, and
only the one that moved it to ``paid`` credits the wallet -- in the same transaction, with a
``topup`` ledger row whose ``(kind, ref=order_no)`` is unique, so a credit can never be applied
twice even by a writer that skipped the status check.  An order for a subscription plan
(``subscription_plan_id``) grants the plan instead, in that same transaction
(``plan_purchase.fulfil_order``).  On PostgreSQL the conditional UPDATE
re-checks its WHERE after waiting for a concurrent writer's row lock; SQLite serialises writers
with ``BEGIN IMMEDIATE``.

A pending order whose ``expires_at`` has passed is treated as expired by a notification even
when the expiry job has not run yet, so the outcome depends on time, not on job timing.  A late
genuine notification is recorded on the order (``notify_payload``, ``notified_at``) and refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import plan_purchase, schema

PENDING = "pending"
PAID = "paid"
EXPIRED = "expired"
FAILED = "failed"
TOPUP = "topup"

#: outcomes of ``apply_payment``
CREDITED = "credited"
ALREADY_PAID = "already_paid"
NOT_FOUND = "not_found"
MISMATCH = "mismatch"
LATE = "late"
CLOSED = "closed"


@dataclass(frozen=True)
class Payment:
    """What a verified provider notification says was paid."""

    order_no: str
    provider: str
    #: the channels whose credentials verified the notification (None: not checked)
    channel_ids: frozenset[str] | None
    #: the paid amount in the order's gateway currency, nano-units
    amount_nanos: int
    currency: str
    provider_ref: str
    payload: str


@dataclass(frozen=True)
class Outcome:
    result: str
    user_id: int | None = None
    reason: str = ""
    balance_after_nanos: int | None = None


def _row(row: Any) -> dict[str, Any]:
    return dict(row._mapping)


def insert(conn: Connection, values: dict[str, Any]) -> dict[str, Any]:
    """Store a new order (pending with its pay URL, or failed) and return the row."""
    o = schema.orders
    key = conn.execute(o.insert().values(**values)).inserted_primary_key
    assert key is not None
    order_id = key[0]
    return _row(conn.execute(select(o).where(o.c.id == order_id)).one())


def get_for_user(conn: Connection, user_id: int, order_no: str) -> dict[str, Any] | None:
    o = schema.orders
    row = conn.execute(
        select(o).where(o.c.order_no == order_no, o.c.user_id == user_id)).first()
    return None if row is None else _row(row)


def get(conn: Connection, order_no: str) -> dict[str, Any] | None:
    o = schema.orders
    row = conn.execute(select(o).where(o.c.order_no == order_no)).first()
    return None if row is None else _row(row)


def list_for_user(conn: Connection, user_id: int, *, limit: int, offset: int = 0,
                  start: datetime | None = None,
                  end: datetime | None = None) -> tuple[list[dict[str, Any]], int]:
    """Newest first; ``start`` inclusive, ``end`` exclusive on ``created_at``."""
    o = schema.orders
    where = [o.c.user_id == user_id]
    if start is not None:
        where.append(o.c.created_at >= start)
    if end is not None:
        where.append(o.c.created_at < end)
    total = int(conn.execute(select(func.count()).select_from(o).where(*where)).scalar() or 0)
    rows = conn.execute(select(o).where(*where).order_by(o.c.created_at.desc(), o.c.id.desc())
                        .limit(limit).offset(offset)).all()
    return [_row(r) for r in rows], total


def _mismatch(order: dict[str, Any], payment: Payment) -> str:
    if order["provider"] != payment.provider:
        return "provider"
    if payment.channel_ids is not None and order["channel_id"] not in payment.channel_ids:
        return "channel"
    if order["currency"].upper() != payment.currency.upper():
        return "currency"
    if order["gateway_amount_nanos"] != payment.amount_nanos:
        return "amount"
    return ""


def apply_payment(conn: Connection, payment: Payment, now: datetime) -> Outcome:
    """Apply one verified notification; credits the wallet at most once per order."""
    o, u = schema.orders, schema.users
    order = conn.execute(
        select(o).where(o.c.order_no == payment.order_no).with_for_update()).first()
    if order is None:
        return Outcome(NOT_FOUND)
    row = _row(order)
    reason = _mismatch(row, payment)
    if reason:
        return Outcome(MISMATCH, row["user_id"], reason)
    if row["status"] == PAID:
        return Outcome(ALREADY_PAID, row["user_id"])
    if row["status"] == PENDING and row["expires_at"] <= now:
        conn.execute(update(o).where(o.c.id == row["id"], o.c.status == PENDING)
                     .values(status=EXPIRED, updated_at=now))
        row["status"] = EXPIRED
    if row["status"] != PENDING:
        if row["status"] == EXPIRED:
            conn.execute(update(o).where(o.c.id == row["id"]).values(
                notify_payload=payment.payload, notified_at=now,
                provider_ref=payment.provider_ref[:255], updated_at=now))
            return Outcome(LATE, row["user_id"], "expired")
        return Outcome(CLOSED, row["user_id"], row["status"])
    moved = conn.execute(
        update(o).where(o.c.id == row["id"], o.c.status == PENDING).values(
            status=PAID, paid_at=now, notified_at=now, notify_payload=payment.payload,
            provider_ref=payment.provider_ref[:255], updated_at=now)).rowcount
    if moved != 1:
        return Outcome(CLOSED, row["user_id"], "changed concurrently")
    if row["subscription_plan_id"] is not None:
        plan_after = plan_purchase.fulfil_order(conn, row, now)
        if plan_after is None:
            return Outcome(NOT_FOUND)
        return Outcome(CREDITED, row["user_id"], balance_after_nanos=plan_after)
    balance = conn.execute(
        select(u.c.balance_nanos).where(u.c.id == row["user_id"]).with_for_update()).scalar()
    if balance is None:
        return Outcome(NOT_FOUND)
    amount = int(row["amount_nanos"])
    conn.execute(update(u).where(u.c.id == row["user_id"])
                 .values(balance_nanos=u.c.balance_nanos + amount))
    after = int(balance) + amount
    conn.execute(schema.ledger.insert().values(
        user_id=row["user_id"], kind=TOPUP, amount_nanos=amount, balance_after_nanos=after,
        actor_user_id=None, ref=row["order_no"], memo=f"top-up via {row['provider']}",
        created_at=now))
    return Outcome(CREDITED, row["user_id"], balance_after_nanos=after)


def expire_due(conn: Connection, now: datetime, limit: int = 500) -> list[str]:
    """Close pending orders whose time is up; returns their order numbers."""
    o = schema.orders
    due = [r[0] for r in conn.execute(
        select(o.c.order_no).where(o.c.status == PENDING, o.c.expires_at <= now)
        .order_by(o.c.expires_at).limit(limit))]
    expired: list[str] = []
    for order_no in due:
        moved = conn.execute(
            update(o).where(o.c.order_no == order_no, o.c.status == PENDING,
                            o.c.expires_at <= now)
            .values(status=EXPIRED, updated_at=now)).rowcount
        if moved == 1:
            expired.append(order_no)
    return expired
