"""Subscription plans (admin CRUD), granting a plan to a user, and the quotas settlement spends.

Plans follow console contract §6.1.  A plan in use by any user subscription (even an expired
one) or by a redeem code cannot be deleted.  Granting creates a *new* subscription row whose
expiry is counted from now, or -- with stacking -- from the latest future expiry of the same
plan, so a grant never shortens access.  Settlement reads a user's active subscriptions under
row locks (``lock_quotas``), applies due resets and the charge in memory (the pure rules in
``gateway.billing.subscriptions``) and writes the new numbers back (``save_quotas``) in the
same transaction as the wallet debit.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import Connection

from gateway.billing.subscriptions import Quota, current, remaining, spending_order
from gateway.store import schema
from gateway.store.catalog_admin import conflict, fetch_row, invalid, name_taken

NOT_FOUND = "Subscription plan not found"


def list_plans(conn: Connection) -> list[dict[str, Any]]:
    p = schema.subscription_plans
    return [dict(r) for r in conn.execute(
        select(p).order_by(p.c.created_at.desc(), p.c.id.desc())).mappings()]


def get_plan(conn: Connection, plan_id: int) -> dict[str, Any]:
    return fetch_row(conn, schema.subscription_plans, plan_id, NOT_FOUND)


def create_plan(conn: Connection, values: dict[str, Any], now: datetime) -> dict[str, Any]:
    p = schema.subscription_plans
    if name_taken(conn, p, "name", values["name"]):
        raise conflict("Plan name already exists", "name")
    key = conn.execute(p.insert().values(**values, created_at=now, updated_at=now)
                       ).inserted_primary_key
    assert key is not None
    return get_plan(conn, int(key[0]))


def update_plan(conn: Connection, plan_id: int, values: dict[str, Any],
                now: datetime) -> dict[str, Any]:
    p = schema.subscription_plans
    fetch_row(conn, p, plan_id, NOT_FOUND, lock=True)
    if name_taken(conn, p, "name", values["name"], except_id=plan_id):
        raise conflict("Plan name already exists", "name")
    conn.execute(update(p).where(p.c.id == plan_id).values(**values, updated_at=now))
    return get_plan(conn, plan_id)


def delete_plan(conn: Connection, plan_id: int) -> None:
    p, s, r = schema.subscription_plans, schema.user_subscriptions, schema.redeem_codes
    fetch_row(conn, p, plan_id, NOT_FOUND, lock=True)
    if conn.execute(select(func.count()).where(s.c.plan_id == plan_id)).scalar_one():
        raise invalid("Subscription plan is in use")
    if conn.execute(select(func.count()).where(r.c.subscription_plan_id == plan_id)).scalar_one():
        raise invalid("Subscription plan is used by redeem codes")
    conn.execute(p.delete().where(p.c.id == plan_id))


# --- user subscriptions -----------------------------------------------------------------------

def grant(conn: Connection, user_id: int, plan: dict[str, Any], duration_days: int,
          stacking: bool, now: datetime, source: str) -> dict[str, Any]:
    """A new subscription of ``plan`` for ``user_id``; ``duration_days`` 0 = never expires."""
    s = schema.user_subscriptions
    active_until: datetime | None = None
    if duration_days > 0:
        base = now
        if stacking:
            latest = conn.execute(select(func.max(s.c.active_until)).where(
                s.c.user_id == user_id, s.c.plan_id == plan["id"])).scalar()
            if latest is not None and latest > now:
                base = latest
        active_until = base + timedelta(days=duration_days)
    row = {
        "user_id": user_id, "plan_id": plan["id"], "balance_nanos": plan["reset_amount_nanos"],
        "active_until": active_until,
        "next_reset_at": now + timedelta(days=plan["reset_interval_days"]),
        "last_reset_at": now, "source": source[:32], "created_at": now, "updated_at": now,
    }
    key = conn.execute(s.insert().values(**row)).inserted_primary_key
    assert key is not None
    return {"id": int(key[0]), **row}


def user_subscriptions(conn: Connection, user_id: int, now: datetime) -> list[dict[str, Any]]:
    """A user's active subscriptions (due resets shown applied), in spending order."""
    quotas = _read(conn, [user_id], now, lock=False).get(user_id, [])
    return [{"id": q.id, "balance_nanos": q.balance_nanos, "active_until": q.active_until,
             "next_reset_at": q.next_reset_at, "last_reset_at": q.last_reset_at}
            for q in quotas]


def spendable_quota(conn: Connection, user_id: int, now: datetime) -> int:
    """What a user's active subscriptions can pay now (due resets applied)."""
    return remaining(_read(conn, [user_id], now, lock=False).get(user_id, []), now)


def lock_quotas(conn: Connection, user_ids: Iterable[int],
                now: datetime) -> dict[int, list[Quota]]:
    """Active subscriptions of ``user_ids`` under row locks, resets applied, in spending order.

    Only users with at least one active subscription appear in the result.
    """
    return _read(conn, user_ids, now, lock=True)


def _read(conn: Connection, user_ids: Iterable[int], now: datetime,
          *, lock: bool) -> dict[int, list[Quota]]:
    ids = sorted(set(user_ids))
    if not ids:
        return {}
    s, p = schema.user_subscriptions, schema.subscription_plans
    query = (select(s.c.id, s.c.user_id, s.c.balance_nanos, s.c.next_reset_at, s.c.active_until,
                    s.c.last_reset_at, s.c.plan_id)
             .where(s.c.user_id.in_(ids), or_(s.c.active_until.is_(None), s.c.active_until > now))
             .order_by(s.c.id))
    if lock:
        query = query.with_for_update()
    rows = conn.execute(query).all()
    if not rows:
        return {}
    plans = {row.id: row for row in conn.execute(
        select(p.c.id, p.c.reset_amount_nanos, p.c.reset_interval_days, p.c.enabled)
        .where(p.c.id.in_(sorted({r.plan_id for r in rows}))))}
    found: dict[int, list[Quota]] = {}
    for row in rows:
        plan = plans[row.plan_id]
        quota = Quota(id=int(row.id), balance_nanos=int(row.balance_nanos),
                      next_reset_at=row.next_reset_at, active_until=row.active_until,
                      last_reset_at=row.last_reset_at,
                      reset_amount_nanos=int(plan.reset_amount_nanos),
                      reset_interval_days=int(plan.reset_interval_days),
                      plan_enabled=bool(plan.enabled))
        found.setdefault(int(row.user_id), []).append(current(quota, now))
    return {uid: spending_order(quotas) for uid, quotas in found.items()}


def save_quotas(conn: Connection, quotas: Iterable[Quota], now: datetime) -> None:
    """Write back balances and reset times of quotas read with ``lock_quotas``."""
    s = schema.user_subscriptions
    for quota in quotas:
        conn.execute(update(s).where(s.c.id == quota.id).values(
            balance_nanos=quota.balance_nanos, next_reset_at=quota.next_reset_at,
            last_reset_at=quota.last_reset_at, updated_at=now))
