"""Check-in rows and the one transaction that rewards a check-in (console contract §4.6).

One reward per user per local day, whatever the concurrency (contract weakness 9): the user's
row is locked first, so concurrent check-ins of one user queue up and each sees the previous
one's record; the unique ``(user_id, check_in_date)`` index and the ledger's unique
``(kind, ref)`` with ref ``checkin:<user>:<date>`` back that up, and a violation is reported as
"already checked in", never a 500.  Record, balance and ledger row commit together.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gateway.store import schema

KIND = "checkin"


class AlreadyCheckedIn(Exception):
    """The user already has a check-in for that local date."""


#: streak -> (reward nano-units, reward kind); called inside the transaction
RewardRule = Callable[[int], tuple[int, str]]


def latest(conn: Connection, user_id: int, limit: int = 7) -> list[dict[str, Any]]:
    c = schema.check_ins
    return [dict(r) for r in conn.execute(
        select(c).where(c.c.user_id == user_id)
        .order_by(c.c.check_in_date.desc()).limit(limit)).mappings()]


def records(conn: Connection, user_id: int, start: str | None, end: str | None,
            page: int | None, page_size: int) -> dict[str, Any]:
    """Records newest first within [start, end] (dates, inclusive); a page or the first N."""
    c = schema.check_ins
    where = [c.c.user_id == user_id]
    if start:
        where.append(c.c.check_in_date >= start)
    if end:
        where.append(c.c.check_in_date <= end)
    query = select(c).where(*where).order_by(c.c.check_in_date.desc())
    total = conn.execute(select(func.count()).select_from(c).where(*where)).scalar_one()
    offset = ((page or 1) - 1) * page_size
    rows = [dict(r) for r in conn.execute(query.offset(offset).limit(page_size)).mappings()]
    return {"items": rows, "total": int(total)}


def check_in(conn: Connection, user_id: int, today: str, yesterday: str, rule: RewardRule,
             now: datetime) -> dict[str, Any]:
    """Record today's check-in and credit its reward; ``AlreadyCheckedIn`` when done already."""
    u, c = schema.users, schema.check_ins
    balance = conn.execute(
        select(u.c.balance_nanos).where(u.c.id == user_id).with_for_update()).scalar()
    if balance is None:
        raise LookupError("user not found")
    previous = conn.execute(
        select(c.c.check_in_date, c.c.streak_days).where(c.c.user_id == user_id)
        .order_by(c.c.check_in_date.desc()).limit(1)).first()
    if previous is not None and previous.check_in_date >= today:
        raise AlreadyCheckedIn()
    streak = previous.streak_days + 1 if previous is not None and (
        previous.check_in_date == yesterday) else 1
    reward, kind = rule(streak)
    if reward < 0:
        raise ValueError("negative check-in reward")
    nested = conn.begin_nested()
    try:
        conn.execute(c.insert().values(
            user_id=user_id, check_in_date=today, reward_amount_nanos=reward,
            streak_days=streak, reward_kind=kind, created_at=now))
        nested.commit()
    except IntegrityError:
        nested.rollback()
        raise AlreadyCheckedIn() from None
    balance = int(balance) + reward
    if reward:
        conn.execute(update(u).where(u.c.id == user_id)
                     .values(balance_nanos=u.c.balance_nanos + reward))
        conn.execute(schema.ledger.insert().values(
            user_id=user_id, kind=KIND, amount_nanos=reward, balance_after_nanos=balance,
            actor_user_id=None, ref=f"{KIND}:{user_id}:{today}", memo=f"check-in {today}",
            created_at=now))
    return {"check_in_date": today, "reward_amount_nanos": reward, "streak_days": streak,
            "reward_kind": kind, "balance_nanos": balance}
