"""Referral reads for the inviter's view, and what settlement needs to pay commissions.

The view exposes invitees as id + username only (contract weakness 16).  Settlement reads the
``referral_*`` settings and the payers' inviters inside its own transaction, so the rate in
force is the committed one, and records each commission in ``referral_commissions`` (unique per
billed call) next to its ``referral`` ledger row.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gateway.billing.referral import commission_rate
from gateway.settings.spec import parse_bool
from gateway.store import schema

RECENT = 50
INVITEES = 100


def settlement_rate(conn: Connection) -> Decimal:
    """The commission rate in force (0 when referrals are off)."""
    st = schema.settings
    values = dict(conn.execute(select(st.c.key, st.c.value).where(
        st.c.key.in_(["referral_enabled", "referral_commission_rate"]))).all())
    if not parse_bool(values.get("referral_enabled"), False):
        return Decimal(0)
    return commission_rate(values.get("referral_commission_rate"))


def referrers_of(conn: Connection, user_ids: Iterable[int]) -> dict[int, int]:
    """Inviter id by invitee id, for the invitees among ``user_ids`` that have one."""
    ids = sorted(set(user_ids))
    if not ids:
        return {}
    u = schema.users
    return {int(uid): int(ref) for uid, ref in conn.execute(
        select(u.c.id, u.c.referrer_id).where(u.c.id.in_(ids), u.c.referrer_id.is_not(None)))
        if ref != uid}


def record_commissions(conn: Connection, rows: list[dict[str, Any]]) -> None:
    if rows:
        conn.execute(schema.referral_commissions.insert(), rows)


def referral_summary(conn: Connection, user_id: int) -> dict[str, Any]:
    """Invite count, invitees (id + username), commission total and the newest commissions."""
    u, rc, logs = schema.users, schema.referral_commissions, schema.usage_logs
    invite_count = conn.execute(
        select(func.count()).where(u.c.referrer_id == user_id)).scalar_one()
    invitees = [{"id": int(r.id), "username": r.username} for r in conn.execute(
        select(u.c.id, u.c.username).where(u.c.referrer_id == user_id)
        .order_by(u.c.id.desc()).limit(INVITEES))]
    total = conn.execute(select(func.coalesce(func.sum(rc.c.amount_nanos), 0))
                         .where(rc.c.referrer_id == user_id)).scalar_one()
    invitee = u.alias("invitee")
    recent = [dict(r) for r in conn.execute(
        select(rc, invitee.c.username.label("referred_username"),
               logs.c.id.label("token_log_id"))
        .outerjoin(invitee, invitee.c.id == rc.c.referred_user_id)
        .outerjoin(logs, logs.c.request_id == rc.c.request_id)
        .where(rc.c.referrer_id == user_id)
        .order_by(rc.c.id.desc()).limit(RECENT)).mappings()]
    return {"invite_count": int(invite_count), "invitees": invitees,
            "total_commission_nanos": int(total), "recent": recent}
