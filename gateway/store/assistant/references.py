"""Checks that the skill and MCP server ids a record names exist for its user (§1.4-§1.6).

Builtin MCP servers live in the admin settings (memory), so their ids are passed in; the user's
custom servers and skills are read in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import invalid
from gateway.store.assistant.user_settings import custom_servers

UNKNOWN_SKILL = "Unknown skill"


def usable_skill_ids(conn: Connection, user_id: int) -> set[str]:
    t = schema.assistant_skills
    return {str(skill_id) for (skill_id,) in conn.execute(
        select(t.c.id).where(t.c.user_id == user_id, t.c.enabled.is_(True)))}


def check_skills(conn: Connection, user_id: int, skill_ids: Iterable[str]) -> None:
    wanted = list(skill_ids)
    if wanted and not set(wanted) <= usable_skill_ids(conn, user_id):
        raise invalid(UNKNOWN_SKILL)


def known_server_ids(conn: Connection, user_id: int, builtin_ids: Iterable[str]) -> set[str]:
    return {*builtin_ids, *(server["id"] for server in custom_servers(conn, user_id))}


def check_servers(conn: Connection, user_id: int, server_ids: Iterable[str],
                  builtin_ids: Iterable[str]) -> None:
    """400 ``Unknown MCP server: <id>`` for the first id neither list holds."""
    wanted = list(server_ids)
    if not wanted:
        return
    known = known_server_ids(conn, user_id, builtin_ids)
    for server_id in wanted:
        if server_id not in known:
            raise invalid(f"Unknown MCP server: {server_id}")
