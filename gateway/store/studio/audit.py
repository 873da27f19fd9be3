"""Audit events (agents contract §4.17): every transition of a studio's operations, append-only.

Written in the same transaction as the change they describe, so an event exists iff the change
does; a work item's events are its timeline.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.studio.rows import AuditEventRow, row_of

TABLE = schema.studio_audit_events


def record(conn: Connection, company_id: int, event_type: str, now: datetime, *,
           actor_type: str = "owner", actor_id: str = "", work_item_id: int | None = None,
           payload: dict[str, Any] | None = None) -> None:
    conn.execute(TABLE.insert().values(
        personal_company_id=company_id, work_item_id=work_item_id, actor_type=actor_type,
        actor_id=actor_id, event_type=event_type,
        payload=orjson.dumps(payload or {}).decode("utf-8"), created_at=now))


def for_work_item(conn: Connection, company_id: int, work_item_id: int) -> list[AuditEventRow]:
    rows = conn.execute(select(TABLE).where(TABLE.c.personal_company_id == company_id,
                                            TABLE.c.work_item_id == work_item_id)
                        .order_by(TABLE.c.id)).mappings()
    return [row_of(AuditEventRow, r) for r in rows]


def for_company(conn: Connection, company_id: int) -> list[AuditEventRow]:
    rows = conn.execute(select(TABLE).where(TABLE.c.personal_company_id == company_id)
                        .order_by(TABLE.c.id)).mappings()
    return [row_of(AuditEventRow, r) for r in rows]
