"""Redeem codes: admin CRUD and the one transaction that redeems a code (console contract §4.12).

Exactly-once under races: the code row is locked (``FOR UPDATE``; SQLite serialises writers),
the use counter moves only through a conditional ``UPDATE ... WHERE used_count < max_uses``
(``max_uses`` 0 = unlimited), and ``redeem_uses`` is unique per (code, user); a redemption that
loses any of these rolls back whole.  Effects, all in that transaction: balance (+ a ``redeem``
ledger row, ref ``redeem:<code id>:<user id>``), group membership (extended, never shortened;
permanent stays permanent -- contract weakness 15) and a new subscription.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema
from gateway.store import subscriptions as plans
from gateway.store.catalog_admin import conflict, fetch_row, invalid, unknown_ids

NOT_FOUND = "Redeem code not found"
KIND = "redeem"
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
GENERATED_LENGTH = 20


class RedeemRefused(Exception):
    """A redemption the caller cannot make; ``message`` is the contract's 400 text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def normalise(code: str) -> str:
    return "".join(code.split()).replace("-", "").upper()


def generate(length: int = GENERATED_LENGTH) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def _with_relations(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    g, p = schema.groups, schema.subscription_plans
    group_ids = sorted({r["group_id"] for r in rows if r["group_id"] is not None})
    plan_ids = sorted({r["subscription_plan_id"] for r in rows
                       if r["subscription_plan_id"] is not None})
    groups = {r["id"]: dict(r) for r in conn.execute(
        select(g).where(g.c.id.in_(group_ids))).mappings()} if group_ids else {}
    found = {r["id"]: dict(r) for r in conn.execute(
        select(p).where(p.c.id.in_(plan_ids))).mappings()} if plan_ids else {}
    return [{**r, "group": groups.get(r["group_id"]),
             "subscription_plan": found.get(r["subscription_plan_id"])} for r in rows]


def list_codes(conn: Connection) -> list[dict[str, Any]]:
    r = schema.redeem_codes
    rows = [dict(x) for x in conn.execute(
        select(r).order_by(r.c.created_at.desc(), r.c.id.desc())).mappings()]
    return _with_relations(conn, rows)


def get_code(conn: Connection, code_id: int) -> dict[str, Any]:
    return _with_relations(conn, [fetch_row(conn, schema.redeem_codes, code_id, NOT_FOUND)])[0]


def _check_refs(conn: Connection, values: dict[str, Any]) -> None:
    if values.get("group_id") is not None and unknown_ids(
            conn, schema.groups, [values["group_id"]]):
        raise invalid("Group not found", "group_id")
    plan_id = values.get("subscription_plan_id")
    if plan_id is not None:
        p = schema.subscription_plans
        enabled = conn.execute(select(p.c.enabled).where(p.c.id == plan_id)).scalar()
        if not enabled:
            raise invalid("Subscription plan not found or disabled", "subscription_plan_id")


def _plan_duration(conn: Connection, values: dict[str, Any]) -> dict[str, Any]:
    """Absent ``subscription_duration_days`` takes the plan's own duration."""
    if values.get("subscription_duration_days") is None:
        days = 0
        if values.get("subscription_plan_id") is not None:
            p = schema.subscription_plans
            days = conn.execute(select(p.c.duration_days).where(
                p.c.id == values["subscription_plan_id"])).scalar() or 0
        values = {**values, "subscription_duration_days": int(days)}
    return values


def create_codes(conn: Connection, values: dict[str, Any], codes: list[str],
                 now: datetime) -> list[dict[str, Any]]:
    """Insert one code per entry of ``codes`` (all with ``values``); a taken code is a 409."""
    _check_refs(conn, values)
    values = _plan_duration(conn, values)
    r = schema.redeem_codes
    taken = set(conn.execute(select(r.c.code).where(r.c.code.in_(codes))).scalars())
    if taken or len(set(codes)) != len(codes):
        raise conflict("Redeem code already exists", "code")
    ids = []
    for code in codes:
        key = conn.execute(r.insert().values(
            **values, code=code, used_count=0, created_at=now, updated_at=now)
        ).inserted_primary_key
        assert key is not None
        ids.append(int(key[0]))
    rows = [dict(x) for x in conn.execute(
        select(r).where(r.c.id.in_(ids)).order_by(r.c.id)).mappings()]
    return _with_relations(conn, rows)


def update_code(conn: Connection, code_id: int, values: dict[str, Any],
                now: datetime) -> dict[str, Any]:
    r = schema.redeem_codes
    fetch_row(conn, r, code_id, NOT_FOUND, lock=True)
    _check_refs(conn, values)
    values = _plan_duration(conn, values)
    if values.get("code"):
        if conn.execute(select(r.c.id).where(r.c.code == values["code"],
                                             r.c.id != code_id)).first():
            raise conflict("Redeem code already exists", "code")
    else:
        values.pop("code", None)
    conn.execute(update(r).where(r.c.id == code_id).values(**values, updated_at=now))
    return get_code(conn, code_id)


def delete_code(conn: Connection, code_id: int) -> None:
    r = schema.redeem_codes
    fetch_row(conn, r, code_id, NOT_FOUND, lock=True)
    conn.execute(r.delete().where(r.c.id == code_id))


# --- redeeming --------------------------------------------------------------------------------

def _grant_group(conn: Connection, user_id: int, group_id: int, days: int, stacking: bool,
                 now: datetime) -> None:
    m = schema.group_memberships
    row = conn.execute(select(m.c.id, m.c.expires_at).where(
        m.c.user_id == user_id, m.c.group_id == group_id).with_for_update()).first()
    wanted: datetime | None = None
    if days > 0:
        base = now
        if stacking and row is not None and row.expires_at is not None and row.expires_at > now:
            base = row.expires_at
        wanted = base + timedelta(days=days)
    if row is None:
        conn.execute(m.insert().values(user_id=user_id, group_id=group_id, expires_at=wanted,
                                       created_at=now, updated_at=now))
        return
    if row.expires_at is None:
        return  # permanent stays permanent
    if wanted is None or wanted > row.expires_at:
        conn.execute(update(m).where(m.c.id == row.id).values(expires_at=wanted,
                                                              updated_at=now))


def redeem(conn: Connection, user_id: int, code_text: str, now: datetime) -> dict[str, Any]:
    """Redeem ``code_text`` for ``user_id``; ``RedeemRefused`` with the contract's message."""
    r, u = schema.redeem_codes, schema.users
    code = conn.execute(select(r).where(r.c.code == code_text).with_for_update()
                        ).mappings().first()
    if code is None:
        raise RedeemRefused("Redeem code not found")
    if not code["enabled"]:
        raise RedeemRefused("Redeem code is disabled")
    if code["expires_at"] is not None and code["expires_at"] <= now:
        raise RedeemRefused("Redeem code has expired")
    if code["max_uses"] > 0 and code["used_count"] >= code["max_uses"]:
        raise RedeemRefused("Redeem code has been fully used")
    uses = schema.redeem_uses
    if conn.execute(select(uses.c.id).where(uses.c.redeem_code_id == code["id"],
                                            uses.c.user_id == user_id)).first():
        raise RedeemRefused("Redeem code already used")
    counted = update(r).where(r.c.id == code["id"])
    if code["max_uses"] > 0:
        counted = counted.where(r.c.used_count < r.c.max_uses)
    if conn.execute(counted.values(used_count=r.c.used_count + 1, updated_at=now)
                    ).rowcount != 1:
        raise RedeemRefused("Redeem code has been fully used")
    nested = conn.begin_nested()
    try:
        conn.execute(uses.insert().values(
            redeem_code_id=code["id"], user_id=user_id, amount_nanos=code["amount_nanos"],
            subscription_plan_id=code["subscription_plan_id"], created_at=now))
        nested.commit()
    except IntegrityError:
        nested.rollback()
        raise RedeemRefused("Redeem code already used") from None
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)
                           .with_for_update()).scalar()
    if balance is None:
        raise RedeemRefused("User not found")
    amount = int(code["amount_nanos"])
    balance = int(balance) + amount
    if amount > 0:
        conn.execute(update(u).where(u.c.id == user_id)
                     .values(balance_nanos=u.c.balance_nanos + amount))
        conn.execute(schema.ledger.insert().values(
            user_id=user_id, kind=KIND, amount_nanos=amount, balance_after_nanos=balance,
            actor_user_id=None, ref=f"{KIND}:{code['id']}:{user_id}",
            memo=f"redeem code {code['id']}", created_at=now))
    if code["group_id"] is not None:
        _grant_group(conn, user_id, code["group_id"], code["group_duration_days"],
                     code["allow_stacking"], now)
    if code["subscription_plan_id"] is not None:
        plan = conn.execute(select(schema.subscription_plans).where(
            schema.subscription_plans.c.id == code["subscription_plan_id"])).mappings().first()
        if plan is None or not plan["enabled"]:
            # raised after writes: the caller's transaction rolls everything back
            raise RedeemRefused("Subscription plan not found or disabled")
        plans.grant(conn, user_id, dict(plan), code["subscription_duration_days"],
                    code["allow_stacking"], now, f"redeem:{code['id']}")
    fresh = conn.execute(select(r).where(r.c.id == code["id"])).mappings().one()
    return {"code": dict(fresh), "amount_nanos": amount, "balance_nanos": balance}

