"""Objectives (agents contract §4.9): a studio's long-lived goals, priority desc then newest."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.studio import audit
from gateway.store.studio.rows import CompanyRow, ObjectiveRow, row_of

TABLE = schema.studio_objectives


def list_objectives(conn: Connection, company_id: int, limit: int | None = None
                    ) -> list[ObjectiveRow]:
    query = select(TABLE).where(TABLE.c.personal_company_id == company_id).order_by(
        TABLE.c.priority.desc(), TABLE.c.created_at.desc(), TABLE.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [row_of(ObjectiveRow, r) for r in conn.execute(query).mappings()]


def create(conn: Connection, company: CompanyRow, user_id: int, title: str, description: str,
           priority: int, target_date: datetime | None, now: datetime) -> ObjectiveRow:
    key = conn.execute(TABLE.insert().values(
        personal_company_id=company.id, owner_user_id=user_id, title=title,
        description=description, status="active", priority=priority, target_date=target_date,
        created_at=now, updated_at=now)).inserted_primary_key
    assert key is not None
    audit.record(conn, company.id, "objective.created", now, actor_id=str(user_id),
                 payload={"objective_id": int(key[0])})
    return row_of(ObjectiveRow, conn.execute(select(TABLE).where(TABLE.c.id == key[0]))
                  .mappings().one())
