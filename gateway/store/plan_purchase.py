"""Buying a subscription plan: from the wallet, or as the effect of a paid payment order.

Why one module for both: the two ways in must grant the same thing by the same rules (console
contract §4.13) -- a purchase renews the user's active *timed* subscription of the plan
(extending its expiry from the current one), creates a new subscription when there is none,
and is refused while the user holds an active *untimed* subscription of the plan (it can never
run out, so buying it again would only take money).

Money: a wallet purchase is a guarded debit (``balance >= price``) plus a
``subscription_purchase`` ledger row, in the same transaction as the grant, so a refused or
failed grant leaves the wallet untouched (the "refund on grant failure" of the origin is a
rollback here).  The user's row is locked first -- the same order settlement uses (users, then
subscriptions) -- so concurrent purchases by one user serialise on PostgreSQL as they do on
SQLite.  A paid plan order writes a ``topup`` credit and a ``subscription_purchase`` debit of
the same amount, both ref'd to the order number, so balances still equal their ledger.

``current_subscriptions`` is what the user's subscription page shows: the active rows with
their plan, due resets applied and stored.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store import subscriptions as plans

KIND = "subscription_purchase"
TOPUP = "topup"
PLAN_UNAVAILABLE = "Subscription plan not found or not purchasable"
ALREADY_UNTIMED = "You already have a permanent subscription to this plan"
INSUFFICIENT = "Insufficient balance"


class PurchaseRefused(Exception):
    """A purchase the caller cannot make: the HTTP status and message to answer with."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


def purchasable_plans(conn: Connection) -> list[dict[str, Any]]:
    """Enabled, purchasable plans, cheapest first."""
    p = schema.subscription_plans
    return [dict(r) for r in conn.execute(
        select(p).where(p.c.enabled.is_(True), p.c.purchasable.is_(True))
        .order_by(p.c.price_nanos, p.c.id)).mappings()]


def purchasable_plan(conn: Connection, plan_id: int) -> dict[str, Any]:
    """The plan if it can be bought now, else ``PurchaseRefused`` (400)."""
    p = schema.subscription_plans
    plan = conn.execute(select(p).where(p.c.id == plan_id)).mappings().first()
    if plan is None or not plan["enabled"] or not plan["purchasable"] \
            or plan["price_nanos"] <= 0:
        raise PurchaseRefused(400, PLAN_UNAVAILABLE, "plan_id")
    return dict(plan)


def _active_of_plan(conn: Connection, user_id: int, plan_id: int, now: datetime,
                    *, lock: bool) -> list[dict[str, Any]]:
    s = schema.user_subscriptions
    query = (select(s).where(s.c.user_id == user_id, s.c.plan_id == plan_id,
                             or_(s.c.active_until.is_(None), s.c.active_until > now))
             .order_by(s.c.id))
    if lock:
        query = query.with_for_update()
    return [dict(r) for r in conn.execute(query).mappings()]


def check_can_subscribe(conn: Connection, user_id: int, plan_id: int, now: datetime) -> None:
    """``PurchaseRefused`` (400) when the user holds an active untimed subscription of the plan."""
    if any(r["active_until"] is None
           for r in _active_of_plan(conn, user_id, plan_id, now, lock=False)):
        raise PurchaseRefused(400, ALREADY_UNTIMED, "plan_id")


def subscribe(conn: Connection, user_id: int, plan: dict[str, Any], now: datetime,
              source: str) -> tuple[dict[str, Any], bool]:
    """Renew the active timed subscription of ``plan`` or grant a new one: (row, renewed)."""
    active = _active_of_plan(conn, user_id, plan["id"], now, lock=True)
    if any(r["active_until"] is None for r in active):
        raise PurchaseRefused(400, ALREADY_UNTIMED, "plan_id")
    if not active:
        row = plans.grant(conn, user_id, plan, int(plan["duration_days"]), False, now, source)
        return row, False
    latest = max(active, key=lambda r: (r["active_until"], r["id"]))
    days = int(plan["duration_days"])
    until = latest["active_until"] + timedelta(days=days) if days > 0 else None
    s = schema.user_subscriptions
    conn.execute(update(s).where(s.c.id == latest["id"]).values(active_until=until,
                                                                  updated_at=now))
    return {**latest, "active_until": until, "updated_at": now}, True


def _locked_balance(conn: Connection, user_id: int) -> int | None:
    u = schema.users
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)
                           .with_for_update()).scalar()
    return None if balance is None else int(balance)


def buy_with_wallet(conn: Connection, user_id: int, plan_id: int,
                    now: datetime) -> dict[str, Any]:
    """Debit the plan's price from the wallet and grant or renew it, all or nothing.

    Returns ``{"subscription", "plan", "renewed", "balance_nanos", "ref"}``;
    ``PurchaseRefused`` 400 (plan, untimed) or 402 (wallet) changes nothing.
    """
    balance = _locked_balance(conn, user_id)
    if balance is None:
        raise PurchaseRefused(404, "User not found")
    plan = purchasable_plan(conn, plan_id)
    price = int(plan["price_nanos"])
    check_can_subscribe(conn, user_id, plan_id, now)
    if balance < price:
        raise PurchaseRefused(402, INSUFFICIENT)
    u = schema.users
    debited = conn.execute(update(u).where(u.c.id == user_id, u.c.balance_nanos >= price)
                           .values(balance_nanos=u.c.balance_nanos - price)).rowcount
    if debited != 1:
        raise PurchaseRefused(402, INSUFFICIENT)
    ref = f"wallet:{user_id}:{secrets.token_hex(8)}"
    row, renewed = subscribe(conn, user_id, plan, now, f"purchase:{plan_id}")
    after = balance - price
    conn.execute(schema.ledger.insert().values(
        user_id=user_id, kind=KIND, amount_nanos=-price, balance_after_nanos=after,
        actor_user_id=None, ref=ref, memo=f"subscription plan {plan_id}", created_at=now))
    return {"subscription": row, "plan": plan, "renewed": renewed, "balance_nanos": after,
            "ref": ref}


def fulfil_order(conn: Connection, order: dict[str, Any], now: datetime) -> int | None:
    """Effects of a plan order just moved to ``paid`` (same transaction): the wallet balance after.

    The plan is granted (or renewed) and the ledger gets a ``topup`` credit and a
    ``subscription_purchase`` debit of the order amount, both ref'd to the order number.
    When the plan can no longer be granted (deleted, or the user meanwhile got an untimed
    subscription of it) the payment stays in the wallet as a plain top-up.  ``None`` when the
    user is gone.
    """
    user_id = int(order["user_id"])
    balance = _locked_balance(conn, user_id)
    if balance is None:
        return None
    amount = int(order["amount_nanos"])
    u = schema.users
    credited = balance + amount
    conn.execute(schema.ledger.insert().values(
        user_id=user_id, kind=TOPUP, amount_nanos=amount, balance_after_nanos=credited,
        actor_user_id=None, ref=order["order_no"],
        memo=f"plan order via {order['provider']}", created_at=now))
    p = schema.subscription_plans
    plan = conn.execute(select(p).where(p.c.id == order["subscription_plan_id"])
                        ).mappings().first()
    granted = False
    if plan is not None:
        try:  # refuses before writing anything
            subscribe(conn, user_id, dict(plan), now, f"order:{order['id']}")
            granted = True
        except PurchaseRefused:
            pass
    if not granted:
        conn.execute(update(u).where(u.c.id == user_id)
                     .values(balance_nanos=u.c.balance_nanos + amount))
        return credited
    conn.execute(schema.ledger.insert().values(
        user_id=user_id, kind=KIND, amount_nanos=-amount, balance_after_nanos=balance,
        actor_user_id=None, ref=order["order_no"],
        memo=f"subscription plan {order['subscription_plan_id']}", created_at=now))
    return balance


def plan_for_order(conn: Connection, user_id: int, plan_id: int,
                   now: datetime) -> dict[str, Any]:
    """The plan a new payment order may be opened for (same refusals as a wallet purchase)."""
    plan = purchasable_plan(conn, plan_id)
    check_can_subscribe(conn, user_id, plan_id, now)
    return plan


def current_subscriptions(conn: Connection, user_id: int,
                          now: datetime) -> list[dict[str, Any]]:
    """The user's active subscriptions in spending order, due resets applied and stored.

    Each row carries its ``plan``.  Only rows whose reset was due are written (under the same
    row locks settlement takes), so a reset is applied once however often this is called.
    """
    quotas = plans.lock_quotas(conn, [user_id], now).get(user_id, [])
    if not quotas:
        return []
    s, p = schema.user_subscriptions, schema.subscription_plans
    ids = [q.id for q in quotas]
    stored = {r.id: r.next_reset_at for r in conn.execute(
        select(s.c.id, s.c.next_reset_at).where(s.c.id.in_(ids)))}
    plans.save_quotas(conn, [q for q in quotas if q.next_reset_at != stored[q.id]], now)
    rows = {r["id"]: dict(r) for r in conn.execute(select(s).where(s.c.id.in_(ids))).mappings()}
    plan_rows = {r["id"]: dict(r) for r in conn.execute(
        select(p).where(p.c.id.in_(sorted({r["plan_id"] for r in rows.values()})))).mappings()}
    return [{**rows[i], "plan": plan_rows[rows[i]["plan_id"]]} for i in ids]
