"""The operations panel (agents contract §4.15): everything ``GET /personal-company`` shows,
read in one transaction (the first read of a studio creates its record, §4.4)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.balances import wallet_totals
from gateway.store.studio import (
    approvals,
    charters,
    companies,
    connector_approvals,
    ledger,
    objectives,
    work_items,
)
from gateway.store.studio.rows import (
    ApprovalRow,
    CharterRow,
    CompanyRow,
    ObjectiveRow,
    StudioRow,
    WorkItemRow,
)

MAX_OBJECTIVES = 8
MAX_WORK_ITEMS = 12


@dataclass(frozen=True)
class Panel:
    company: CompanyRow
    charter: CharterRow | None
    objectives: list[ObjectiveRow]
    work_items: list[WorkItemRow]
    approvals: list[ApprovalRow]
    reserved_nanos: int
    consumed_nanos: int
    monthly_reserved_nanos: int
    active_objectives: int
    active_work_items: int
    blocked_work_items: int
    balance_nanos: int
    connector_approvals: list[connector_approvals.PendingConnectorTask]


def _sum(conn: Connection, column: Any, *where: Any) -> int:
    return int(conn.execute(select(func.coalesce(func.sum(column), 0)).where(*where)).scalar()
               or 0)


def _count(conn: Connection, table: Any, *where: Any) -> int:
    return int(conn.execute(select(func.count()).select_from(table).where(*where)).scalar()
               or 0)


def load(conn: Connection, user_id: int, studio: StudioRow, now: datetime) -> Panel:
    company = companies.ensure_default(conn, user_id, studio, now)
    w, o = schema.studio_work_items, schema.studio_objectives
    mine = w.c.personal_company_id == company.id
    return Panel(
        company=company,
        charter=charters.find(conn, company.charter_revision_id),
        objectives=objectives.list_objectives(conn, company.id, MAX_OBJECTIVES),
        work_items=work_items.list_items(conn, company.id, MAX_WORK_ITEMS),
        approvals=approvals.list_approvals(conn, company.id, pending_only=True),
        reserved_nanos=_sum(conn, w.c.reserved_cost_nanos, mine,
                            w.c.status.notin_(("cancelled", "delivered"))),
        consumed_nanos=_sum(conn, w.c.consumed_cost_nanos, mine),
        monthly_reserved_nanos=ledger.reserved_since(conn, company.id,
                                                     ledger.month_start(now)),
        active_objectives=_count(conn, o, o.c.personal_company_id == company.id,
                                 o.c.status == "active"),
        active_work_items=_count(conn, w, mine, w.c.status.in_(work_items.ACTIVE)),
        blocked_work_items=_count(conn, w, mine, w.c.status == "blocked"),
        balance_nanos=wallet_totals(conn, user_id).balance_nanos,
        connector_approvals=connector_approvals.pending(conn, company.id))
