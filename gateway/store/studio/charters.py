"""Charter revisions (agents contract §4.5): immutable, numbered 1, 2, ... per operations record.

A new revision is ``latest + 1`` and becomes the record's current one; none is ever edited or
deleted, so work keeps a stable reference to the charter it ran under.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.studio import audit
from gateway.store.studio.rows import CharterRow, row_of
from gateway.studio.risk import DEFAULT_POLICY

TABLE = schema.studio_charters
DEFAULT_MISSION = "Chief-scheduled delivery through immutable internal Studio sessions."


def add_revision(conn: Connection, company_id: int, user_id: int, now: datetime, *,
                 mission: str, goals: str = "[]", data_boundaries: str = "[]",
                 prohibited_actions: str = "[]", approval_policy: str = DEFAULT_POLICY
                 ) -> CharterRow:
    """Append revision ``latest + 1`` and point the record at it (no audit: callers say why)."""
    latest = conn.execute(select(func.max(TABLE.c.revision)).where(
        TABLE.c.personal_company_id == company_id)).scalar()
    key = conn.execute(TABLE.insert().values(
        personal_company_id=company_id, revision=(latest or 0) + 1, mission=mission,
        goals=goals, data_boundaries=data_boundaries, prohibited_actions=prohibited_actions,
        approval_policy=approval_policy, created_by_user_id=user_id,
        created_at=now)).inserted_primary_key
    assert key is not None
    conn.execute(update(schema.studio_companies).where(schema.studio_companies.c.id == company_id)
                 .values(charter_revision_id=key[0], updated_at=now))
    return get(conn, key[0])


def revise(conn: Connection, company_id: int, user_id: int, now: datetime, **fields: str
           ) -> CharterRow:
    """``PUT /charter``: a new revision plus audit ``charter.revised``."""
    charter = add_revision(conn, company_id, user_id, now, **fields)
    audit.record(conn, company_id, "charter.revised", now, actor_id=str(user_id),
                 payload={"revision": charter.revision})
    return charter


def get(conn: Connection, charter_id: int) -> CharterRow:
    return row_of(CharterRow, conn.execute(select(TABLE).where(TABLE.c.id == charter_id))
                  .mappings().one())


def find(conn: Connection, charter_id: int | None) -> CharterRow | None:
    if charter_id is None:
        return None
    found = conn.execute(select(TABLE).where(TABLE.c.id == charter_id)).mappings().first()
    return row_of(CharterRow, found) if found is not None else None


def history(conn: Connection, company_id: int) -> list[CharterRow]:
    """[P-32]: every revision, newest first."""
    rows = conn.execute(select(TABLE).where(TABLE.c.personal_company_id == company_id)
                        .order_by(TABLE.c.revision.desc())).mappings()
    return [row_of(CharterRow, r) for r in rows]
