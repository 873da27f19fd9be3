"""Editable skills (agents contract §1.5, [P-5]): per-user, names unique per user.

A skill's client id is its number as a string.  Deleting one also removes its id from the
user's agents, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.agents import drop_skill
from gateway.store.assistant.references import check_servers
from gateway.store.assistant.refused import conflict, missing
from gateway.store.assistant.rows import SkillRow, numeric_key, row_of

TABLE = schema.assistant_skills
NOT_FOUND = "Skill not found"
NAME_TAKEN = "Skill name already exists"


def list_skills(conn: Connection, user_id: int) -> list[SkillRow]:
    rows = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id)
                        .order_by(TABLE.c.created_at, TABLE.c.id)).mappings()
    return [row_of(SkillRow, r) for r in rows]


def skills_by_key(conn: Connection, user_id: int, keys: Iterable[str]) -> list[SkillRow]:
    """The user's skills with these client ids, in the order asked (unknown ids skipped)."""
    numbers = {key: numeric_key(key) for key in keys}
    wanted = [key for key, number in numbers.items() if number is not None]
    if not wanted:
        return []
    rows = conn.execute(select(TABLE).where(
        TABLE.c.user_id == user_id, TABLE.c.id.in_([numbers[k] for k in wanted]))).mappings()
    found = {str(r["id"]): row_of(SkillRow, r) for r in rows}
    return [found[k] for k in dict.fromkeys(wanted) if k in found]


def get_skill(conn: Connection, user_id: int, key: str) -> SkillRow:
    found = skills_by_key(conn, user_id, [key])
    if not found:
        raise missing(NOT_FOUND)
    return found[0]


def _check(conn: Connection, user_id: int, values: dict[str, Any], builtin_ids: Iterable[str],
           except_id: int | None) -> None:
    taken = select(TABLE.c.id).where(TABLE.c.user_id == user_id, TABLE.c.name == values["name"])
    if except_id is not None:
        taken = taken.where(TABLE.c.id != except_id)
    if conn.execute(taken).first() is not None:
        raise conflict(NAME_TAKEN)
    check_servers(conn, user_id, values["mcp_server_ids"], builtin_ids)


def create_skill(conn: Connection, user_id: int, values: dict[str, Any],
                 builtin_ids: Iterable[str], now: datetime) -> SkillRow:
    _check(conn, user_id, values, builtin_ids, None)
    key = conn.execute(TABLE.insert().values(**values, user_id=user_id, created_at=now,
                                             updated_at=now)).inserted_primary_key
    assert key is not None
    return get_skill(conn, user_id, str(key[0]))


def update_skill(conn: Connection, user_id: int, key: str, values: dict[str, Any],
                 builtin_ids: Iterable[str], now: datetime) -> SkillRow:
    skill = get_skill(conn, user_id, key)
    _check(conn, user_id, values, builtin_ids, skill.id)
    conn.execute(update(TABLE).where(TABLE.c.id == skill.id).values(**values, updated_at=now))
    return get_skill(conn, user_id, key)


def delete_skill(conn: Connection, user_id: int, key: str, now: datetime) -> None:
    skill = get_skill(conn, user_id, key)
    conn.execute(TABLE.delete().where(TABLE.c.id == skill.id))
    drop_skill(conn, user_id, skill.key, now)
