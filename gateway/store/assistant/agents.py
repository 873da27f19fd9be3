"""Chat agents (agents contract §1.4): the per-user list with its always-present ``default``.

An agent's client id is its number as a string, or ``"default"`` for the user's default agent
(a row flagged ``is_default``, created the first time the user's agents are touched).  Names
are unique per user; the default agent keeps the name ``Default``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.references import check_servers, check_skills
from gateway.store.assistant.refused import conflict, invalid, missing
from gateway.store.assistant.rows import AgentRow, numeric_key, row_of

TABLE = schema.assistant_agents
DEFAULT_KEY = "default"
DEFAULT_NAME = "Default"
NOT_FOUND = "Agent not found"
NAME_TAKEN = "Agent name already exists"


def ensure_default(conn: Connection, user_id: int, now: datetime) -> None:
    t = TABLE
    if conn.execute(select(t.c.id).where(t.c.user_id == user_id,
                                         t.c.is_default.is_(True))).first() is not None:
        return
    insert = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    conn.execute(insert(t).values(user_id=user_id, is_default=True, name=DEFAULT_NAME,
                                  created_at=now, updated_at=now).on_conflict_do_nothing())


def list_agents(conn: Connection, user_id: int, now: datetime) -> list[AgentRow]:
    ensure_default(conn, user_id, now)
    rows = conn.execute(select(TABLE).where(TABLE.c.user_id == user_id)
                        .order_by(TABLE.c.created_at, TABLE.c.id)).mappings()
    return [row_of(AgentRow, r) for r in rows]


#: the two lookups every completion makes, built once (a statement built per call costs
#: more Python than SQLite's own work: operators, clause lists and the cache key)
_DEFAULT_AGENT = select(TABLE).where(TABLE.c.user_id == bindparam("user_id"),
                                     TABLE.c.is_default.is_(True))
_AGENT_BY_ID = select(TABLE).where(TABLE.c.user_id == bindparam("user_id"),
                                   TABLE.c.id == bindparam("agent_id"))


def _lookup(user_id: int, key: str) -> tuple[Any, dict[str, int]] | None:
    """The statement and parameters finding agent ``key`` of the user (None: no such key)."""
    if key == DEFAULT_KEY:
        return _DEFAULT_AGENT, {"user_id": user_id}
    number = numeric_key(key)
    if number is None:
        return None
    return _AGENT_BY_ID, {"user_id": user_id, "agent_id": number}


def find_agent(conn: Connection, user_id: int, key: str, now: datetime) -> AgentRow | None:
    """The user's agent with client id ``key`` (the default one is created if needed: one
    read when it exists, as it does after the user's first completion)."""
    lookup = _lookup(user_id, key)
    if lookup is None:
        return None
    statement, params = lookup
    found = conn.execute(statement, params).mappings().first()
    if found is None and key == DEFAULT_KEY:
        ensure_default(conn, user_id, now)
        found = conn.execute(statement, params).mappings().first()
    return row_of(AgentRow, found) if found is not None else None


def get_agent(conn: Connection, user_id: int, key: str, now: datetime) -> AgentRow:
    agent = find_agent(conn, user_id, key, now)
    if agent is None:
        raise missing(NOT_FOUND)
    return agent


def _check(conn: Connection, user_id: int, values: dict[str, Any], builtin_ids: Iterable[str],
           except_id: int | None) -> None:
    t = TABLE
    taken = select(t.c.id).where(t.c.user_id == user_id, t.c.name == values["name"])
    if except_id is not None:
        taken = taken.where(t.c.id != except_id)
    if conn.execute(taken).first() is not None:
        raise conflict(NAME_TAKEN)
    check_skills(conn, user_id, values["skill_ids"])
    check_servers(conn, user_id, values["mcp_server_ids"], builtin_ids)


def create_agent(conn: Connection, user_id: int, values: dict[str, Any],
                 builtin_ids: Iterable[str], now: datetime) -> AgentRow:
    ensure_default(conn, user_id, now)
    _check(conn, user_id, values, builtin_ids, None)
    key = conn.execute(TABLE.insert().values(**values, user_id=user_id, created_at=now,
                                             updated_at=now)).inserted_primary_key
    assert key is not None
    return get_agent(conn, user_id, str(key[0]), now)


def update_agent(conn: Connection, user_id: int, key: str, values: dict[str, Any],
                 builtin_ids: Iterable[str], now: datetime) -> AgentRow:
    agent = get_agent(conn, user_id, key, now)
    if agent.is_default:
        values = {**values, "name": agent.name}
    _check(conn, user_id, values, builtin_ids, agent.id)
    conn.execute(update(TABLE).where(TABLE.c.id == agent.id).values(**values, updated_at=now))
    return get_agent(conn, user_id, key, now)


def delete_agent(conn: Connection, user_id: int, key: str, now: datetime) -> None:
    agent = get_agent(conn, user_id, key, now)
    if agent.is_default:
        raise invalid("Default agent cannot be deleted")
    conn.execute(TABLE.delete().where(TABLE.c.id == agent.id))


def drop_skill(conn: Connection, user_id: int, skill_key: str, now: datetime) -> None:
    """Remove a deleted skill's id from every agent of the user."""
    rows = conn.execute(select(TABLE.c.id, TABLE.c.skill_ids).where(
        TABLE.c.user_id == user_id)).all()
    for agent_id, skill_ids in rows:
        if skill_key in (skill_ids or []):
            conn.execute(update(TABLE).where(TABLE.c.id == agent_id).values(
                skill_ids=[s for s in skill_ids if s != skill_key], updated_at=now))

