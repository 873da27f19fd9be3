"""Approval requests (agents contract §4.12): one per ``owner_decision`` work item, decided by
the owner.  Approved → the item is ``authorized`` (the owner then queues it); rejected → the
item is ``cancelled`` and its reservation released (reference ``approval_rejection``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, missing
from gateway.store.studio import audit, ledger, work_items
from gateway.store.studio.rows import ApprovalRow, CompanyRow, numeric_key, row_of

TABLE = schema.studio_approvals
NOT_FOUND = "Approval not found"
DECIDED = "Approval has already been decided"
EXPIRED = "Approval has expired"
NO_PENDING = "Work item does not have a pending approval"
DECISIONS = ("approved", "rejected")


def list_approvals(conn: Connection, company_id: int, *, pending_only: bool = False
                   ) -> list[ApprovalRow]:
    query = select(TABLE).where(TABLE.c.personal_company_id == company_id)
    if pending_only:
        query = query.where(TABLE.c.status == "pending").order_by(TABLE.c.created_at,
                                                                   TABLE.c.id)
    else:
        query = query.order_by(TABLE.c.created_at.desc(), TABLE.c.id.desc())
    return [row_of(ApprovalRow, r) for r in conn.execute(query).mappings()]


def _find(conn: Connection, company_id: int, *where: Any) -> ApprovalRow | None:
    found = conn.execute(select(TABLE).where(TABLE.c.personal_company_id == company_id, *where)
                         ).mappings().first()
    return row_of(ApprovalRow, found) if found is not None else None


def decide(conn: Connection, company: CompanyRow, user_id: int, key: str, decision: str,
           reason: str, now: datetime) -> tuple[str, str]:
    """``POST /approvals/:id/decide``: (decision, work item status); the decision is
    ``expired`` when the approval was past its expiry (now marked so)."""
    approval_id = numeric_key(key)
    approval = None if approval_id is None else _find(conn, company.id, TABLE.c.id == approval_id)
    if approval is None:
        raise missing(NOT_FOUND)
    return _decide(conn, company, user_id, approval, decision, reason, now)


def approve_item(conn: Connection, company: CompanyRow, user_id: int, item_key: str,
                 reason: str, now: datetime) -> tuple[str, str]:
    """``POST /work-items/:id/approve``: the item's pending approval, approved."""
    item = work_items.get(conn, company.id, item_key)
    approval = _find(conn, company.id, TABLE.c.work_item_id == item.id)
    if approval is None or approval.status != "pending":
        raise conflict(NO_PENDING)
    return _decide(conn, company, user_id, approval, "approved", reason, now)


def _decide(conn: Connection, company: CompanyRow, user_id: int, approval: ApprovalRow,
            decision: str, reason: str, now: datetime) -> tuple[str, str]:
    if approval.status != "pending":
        raise conflict(DECIDED)
    if approval.expires_at is not None and approval.expires_at <= now:
        conn.execute(update(TABLE).where(TABLE.c.id == approval.id,
                                         TABLE.c.status == "pending")
                     .values(status="expired", updated_at=now))
        # the expiry must be kept, so it is answered (not raised) and the route refuses it
        return "expired", work_items.get(conn, company.id, approval.work_item_id).status
    done = conn.execute(update(TABLE).where(TABLE.c.id == approval.id,
                                            TABLE.c.status == "pending").values(
        status=decision, decision_reason=reason, decided_by_user_id=user_id, decided_at=now,
        updated_at=now)).rowcount
    if not done:
        raise conflict(DECIDED)
    items = schema.studio_work_items
    item = work_items.get(conn, company.id, approval.work_item_id)
    if decision == "approved":
        to = "authorized"
        conn.execute(update(items).where(items.c.id == item.id,
                                         items.c.status == "owner_decision")
                     .values(status=to, updated_at=now))
    else:
        to = "cancelled"
        conn.execute(update(items).where(items.c.id == item.id,
                                         items.c.status.notin_(("delivered", "cancelled")))
                     .values(status=to, reserved_cost_nanos=0, updated_at=now))
        ledger.release(conn, company.id, item.id, item.reserved_cost_nanos, now,
                       "approval_rejection")
    audit.record(conn, company.id, f"approval.{decision}", now, actor_id=str(user_id),
                 work_item_id=item.id, payload={"approval_id": approval.id, "reason": reason})
    return decision, work_items.get(conn, company.id, item.id).status
