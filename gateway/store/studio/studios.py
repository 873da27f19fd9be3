"""Studios (agents contract §4.1): a user's teams of chat agents, keyed ``(user, studio id)``.

A studio is the only way a ``studio_id`` comes to exist; its operations record (``companies``)
is looked up through it.  Another user's studio id behaves exactly like a missing one.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import missing
from gateway.store.studio.rows import StudioRow, row_of
from gateway.studio.members import StudioInput

TABLE = schema.studios
NOT_FOUND = "Studio not found"


def list_studios(conn: Connection, user_id: int) -> list[StudioRow]:
    rows = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id)
                        .order_by(TABLE.c.name, TABLE.c.id)).mappings()
    return [row_of(StudioRow, r) for r in rows]


def find_studio(conn: Connection, user_id: int, studio_id: str) -> StudioRow | None:
    found = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id,
                                             TABLE.c.id == studio_id)).mappings().first()
    return row_of(StudioRow, found) if found is not None else None


def get_studio(conn: Connection, user_id: int, studio_id: str) -> StudioRow:
    studio = find_studio(conn, user_id, studio_id)
    if studio is None:
        raise missing(NOT_FOUND)
    return studio


def save_studio(conn: Connection, user_id: int, studio: StudioInput, now: datetime
                ) -> StudioRow:
    """Create the studio, or replace it when the user already has one with this id."""
    values = {"name": studio.name, "description": studio.description, "agents": studio.agents,
              "updated_at": now}
    if find_studio(conn, user_id, studio.id) is None:
        conn.execute(TABLE.insert().values(user_id=user_id, id=studio.id, created_at=now,
                                           **values))
    else:
        conn.execute(update(TABLE).where(TABLE.c.user_id == user_id, TABLE.c.id == studio.id)
                     .values(**values))
    return get_studio(conn, user_id, studio.id)


def update_studio(conn: Connection, user_id: int, studio: StudioInput, now: datetime
                  ) -> StudioRow:
    get_studio(conn, user_id, studio.id)
    return save_studio(conn, user_id, studio, now)


def delete_studio(conn: Connection, user_id: int, studio_id: str) -> list[str]:
    """Delete the studio and its operations record with everything the record holds (work,
    attempts, ledger, audit: the foreign keys cascade), so a studio created later with the
    same id starts from a fresh record.  Returns the runs of the record's executing attempts,
    which the caller stops once this commits."""
    get_studio(conn, user_id, studio_id)
    companies, attempts = schema.studio_companies, schema.studio_work_attempts
    mine = (companies.c.owner_user_id == user_id) & (companies.c.agent_group_id == studio_id)
    runs = [str(run_id) for run_id in conn.execute(
        select(attempts.c.advanced_chat_run_id)
        .join(companies, companies.c.id == attempts.c.personal_company_id)
        .where(mine, attempts.c.status == "executing", attempts.c.advanced_chat_run_id != "")
    ).scalars()]
    conn.execute(companies.delete().where(mine))
    conn.execute(TABLE.delete().where(TABLE.c.user_id == user_id, TABLE.c.id == studio_id))
    return runs
