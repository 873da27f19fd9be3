"""Internal signals and the outbox (agents contract §4.4, §4.8): bookkeeping rows nothing
external consumes.  Signals arrive in ``inbox`` and the control loop triages them; outbox rows
are keyed, so one with a fixed key is written once per studio."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema


def add(conn: Connection, company_id: int, kind: str, now: datetime, *,
        work_item_id: int | None = None, payload: dict[str, Any] | None = None) -> None:
    conn.execute(schema.studio_signals.insert().values(
        personal_company_id=company_id, work_item_id=work_item_id, kind=kind, status="inbox",
        payload=orjson.dumps(payload or {}).decode("utf-8"), created_at=now))


def post_once(conn: Connection, company_id: int, event_key: str, event_type: str,
              now: datetime, payload: dict[str, Any] | None = None) -> bool:
    """Write an outbox row unless one with this key exists; True when written."""
    t = schema.studio_outbox
    if conn.execute(select(t.c.id).where(t.c.personal_company_id == company_id,
                                         t.c.event_key == event_key)).first() is not None:
        return False
    conn.execute(t.insert().values(personal_company_id=company_id, event_key=event_key,
                                   event_type=event_type,
                                   payload=orjson.dumps(payload or {}).decode("utf-8"),
                                   created_at=now))
    return True
