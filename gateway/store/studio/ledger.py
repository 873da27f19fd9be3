"""The studio budget ledger (agents contract §4.11): append-only reservation (+), release (-)
and consumption (+) entries, and the budget checks a new work item's estimate must pass.

Budgets limit outstanding reservations: only reservation and release entries since the UTC day
or month start count, consumption does not.  A budget of 0 is no limit.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import Refused
from gateway.store.studio.rows import CompanyRow

TABLE = schema.studio_budget_ledger
OVER_BUDGET = "Work item exceeds the available Personal Company budget"


def add(conn: Connection, company_id: int, entry_type: str, amount_nanos: int, now: datetime,
        *, work_item_id: int | None = None, reference: str = "") -> None:
    conn.execute(TABLE.insert().values(
        personal_company_id=company_id, work_item_id=work_item_id, entry_type=entry_type,
        amount_nanos=amount_nanos, reference=reference, created_at=now))


def day_start(now: datetime) -> datetime:
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def month_start(now: datetime) -> datetime:
    return day_start(now).replace(day=1)


def reserved_since(conn: Connection, company_id: int, since: datetime) -> int:
    """Σ reservation + release entries since ``since`` (nanos)."""
    total = conn.execute(select(func.coalesce(func.sum(TABLE.c.amount_nanos), 0)).where(
        TABLE.c.personal_company_id == company_id,
        TABLE.c.entry_type.in_(("reservation", "release")),
        TABLE.c.created_at >= since)).scalar()
    return int(total or 0)


def check_estimate(conn: Connection, company: CompanyRow, estimate_nanos: int, now: datetime
                   ) -> None:
    """402 when the estimate does not fit the daily or monthly budget (§4.11)."""
    if estimate_nanos <= 0:
        return
    daily, monthly = company.daily_budget_nanos, company.monthly_budget_nanos
    over = ((daily > 0 and estimate_nanos > daily)
            or (monthly > 0 and estimate_nanos > monthly)
            or (monthly > 0 and reserved_since(conn, company.id, month_start(now))
                + estimate_nanos > monthly)
            or (daily > 0 and reserved_since(conn, company.id, day_start(now))
                + estimate_nanos > daily))
    if over:
        raise Refused(402, OVER_BUDGET)


def release(conn: Connection, company_id: int, work_item_id: int, reserved_nanos: int,
            now: datetime, reference: str) -> None:
    """Give back an item's reservation (a ``release`` entry when there was one)."""
    if reserved_nanos > 0:
        add(conn, company_id, "release", -reserved_nanos, now, work_item_id=work_item_id,
            reference=reference)
