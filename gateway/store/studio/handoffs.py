"""Handoffs (agents contract §4.14): a structured transfer of a work item between two
employees of the studio.  Deciding one never changes the work item."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, invalid, missing
from gateway.store.studio import audit, team, work_items
from gateway.store.studio.rows import CompanyRow, HandoffRow, numeric_key, row_of

TABLE = schema.studio_handoffs
NOT_FOUND = "Work item or handoff not found"
UNAVAILABLE = ("Handoff contains an unavailable employee, attempt, or invalid structured "
               "evidence")
DECIDED = "Handoff has already been decided"
DECISIONS = ("accepted", "rejected", "needs_revision")


@dataclass(frozen=True)
class NewHandoff:
    to_employee_id: int
    from_employee_id: int | None
    work_attempt_id: int | None
    completion_summary: str
    next_steps: str
    evidence: str
    risks: str


def _get(conn: Connection, handoff_id: int) -> HandoffRow:
    return row_of(HandoffRow, conn.execute(select(TABLE).where(TABLE.c.id == handoff_id))
                  .mappings().one())


def create(conn: Connection, company: CompanyRow, user_id: int, item_key: str,
           handoff: NewHandoff, now: datetime) -> HandoffRow:
    item = work_items.get(conn, company.id, item_key, NOT_FOUND)
    people = [handoff.to_employee_id] + ([handoff.from_employee_id]
                                         if handoff.from_employee_id is not None else [])
    if len(set(people)) != len(people) or not all(
            team.active_member(conn, company.id, p) for p in people):
        raise invalid(UNAVAILABLE)
    if handoff.work_attempt_id is not None:
        a = schema.studio_work_attempts
        if conn.execute(select(a.c.id).where(a.c.id == handoff.work_attempt_id,
                                             a.c.work_item_id == item.id)).first() is None:
            raise invalid(UNAVAILABLE)
    key = conn.execute(TABLE.insert().values(
        work_item_id=item.id, work_attempt_id=handoff.work_attempt_id,
        from_employee_id=handoff.from_employee_id, to_employee_id=handoff.to_employee_id,
        status="pending", completion_summary=handoff.completion_summary,
        evidence=handoff.evidence, risks=handoff.risks, next_steps=handoff.next_steps,
        created_at=now, updated_at=now)).inserted_primary_key
    assert key is not None
    audit.record(conn, company.id, "handoff.created", now, actor_id=str(user_id),
                 work_item_id=item.id, payload={"handoff_id": int(key[0])})
    return _get(conn, int(key[0]))


def decide(conn: Connection, company: CompanyRow, user_id: int, key: str, decision: str,
           note: str, now: datetime) -> HandoffRow:
    handoff_id = numeric_key(key)
    w = schema.studio_work_items
    found = None if handoff_id is None else conn.execute(
        select(TABLE).join(w, w.c.id == TABLE.c.work_item_id)
        .where(TABLE.c.id == handoff_id, w.c.personal_company_id == company.id)
    ).mappings().first()
    if found is None:
        raise missing(NOT_FOUND)
    handoff = row_of(HandoffRow, found)
    if decision not in DECISIONS:
        raise invalid(UNAVAILABLE)
    if handoff.status != "pending" or not conn.execute(
            update(TABLE).where(TABLE.c.id == handoff.id, TABLE.c.status == "pending").values(
                status=decision, decision_note=note, updated_at=now,
                accepted_at=now if decision == "accepted" else None)).rowcount:
        raise conflict(DECIDED)
    audit.record(conn, company.id, f"handoff.{decision}", now, actor_id=str(user_id),
                 work_item_id=handoff.work_item_id, payload={"handoff_id": handoff.id,
                                                             "note": note})
    return _get(conn, handoff.id)
