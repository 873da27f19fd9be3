"""Chat sessions and their messages (agents contract §1.6).

A session id is client-chosen (or ``acs-...``) and unique across users: saving a session whose
id another user owns is a 409, never a silent takeover.  Every save replaces the whole message
list.  Internal studio sessions are read-only here, and a session with a queued or running run
cannot be overwritten (both 409s are checked in the saving transaction).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, missing
from gateway.store.assistant.rows import (
    ACTIVE_RUN_STATUSES,
    MessageRow,
    RunRow,
    SessionRow,
    row_of,
)

SESSIONS = schema.assistant_sessions
MESSAGES = schema.assistant_messages
RUNS = schema.assistant_runs
EVENTS = schema.assistant_run_events

NOT_FOUND = "Session not found"
ID_TAKEN = "Session id is already used"
IMMUTABLE = "Internal Studio sessions are immutable"
RUN_ACTIVE = "This session already has a running assistant run"


@dataclass(frozen=True)
class StoredSession:
    """A session with its messages (by position) and its newest run, if any."""

    session: SessionRow
    messages: list[MessageRow]
    latest_run: RunRow | None


def _owned(conn: Connection, session_id: str) -> SessionRow | None:
    found = conn.execute(select(SESSIONS).where(SESSIONS.c.id == session_id)).mappings().first()
    return row_of(SessionRow, found) if found is not None else None


def is_internal(conn: Connection, session_id: str) -> bool:
    """A studio operations session (§4.16): read-only for its owner."""
    return bool(conn.execute(select(SESSIONS.c.internal).where(SESSIONS.c.id == session_id))
                .scalar())


def has_active_run(conn: Connection, session_id: str) -> bool:
    return conn.execute(select(RUNS.c.id).where(
        RUNS.c.session_id == session_id, RUNS.c.status.in_(ACTIVE_RUN_STATUSES))
        .limit(1)).first() is not None


def check_writable(conn: Connection, user_id: int, session_id: str, *,
                   allow_active_run: bool = False) -> SessionRow | None:
    """The stored session (None if new), or the 409 that forbids writing it."""
    existing = _owned(conn, session_id)
    if existing is None:
        return None
    if existing.user_id != user_id:
        raise conflict(ID_TAKEN)
    if existing.internal:
        raise conflict(IMMUTABLE)
    if not allow_active_run and has_active_run(conn, session_id):
        raise conflict(RUN_ACTIVE)
    return existing


def save_session(conn: Connection, user_id: int, session_id: str, values: dict[str, Any],
                 messages: list[dict[str, Any]], now: datetime, *,
                 allow_active_run: bool = False) -> StoredSession:
    """Create or overwrite the session and replace its messages (``values`` = columns)."""
    existing = check_writable(conn, user_id, session_id, allow_active_run=allow_active_run)
    if existing is None:
        conn.execute(SESSIONS.insert().values(**values, id=session_id, user_id=user_id,
                                              created_at=now, updated_at=now))
    else:
        conn.execute(update(SESSIONS).where(SESSIONS.c.id == session_id)
                     .values(**values, updated_at=now))
    replace_messages(conn, session_id, messages, now)
    return get_session(conn, user_id, session_id)


def replace_messages(conn: Connection, session_id: str, messages: list[dict[str, Any]],
                     now: datetime) -> list[MessageRow]:
    """The session's messages are now ``messages`` (by position); answered as written."""
    conn.execute(delete(MESSAGES).where(MESSAGES.c.session_id == session_id))
    return insert_messages(conn, session_id, messages, now)


def message_rows(session_id: str, messages: list[dict[str, Any]],
                 now: datetime) -> list[dict[str, Any]]:
    """The rows of ``messages`` (by position) in a session."""
    return [{"content": "", "content_parts": [], "tool_calls": [], **message,
             "session_id": session_id, "position": position,
             "created_at": message.get("created_at") or now, "updated_at": now}
            for position, message in enumerate(messages)]


def insert_messages(conn: Connection, session_id: str, messages: list[dict[str, Any]],
                    now: datetime) -> list[MessageRow]:
    """``messages`` (by position) into a session that has none; answered as written."""
    rows = message_rows(session_id, messages, now)
    if rows:
        conn.execute(MESSAGES.insert(), rows)
    return [row_of(MessageRow, row) for row in rows]


def _messages(conn: Connection, session_ids: list[str]) -> dict[str, list[MessageRow]]:
    by_session: dict[str, list[MessageRow]] = {sid: [] for sid in session_ids}
    if not session_ids:
        return by_session
    rows = conn.execute(select(MESSAGES).where(MESSAGES.c.session_id.in_(session_ids))
                        .order_by(MESSAGES.c.session_id, MESSAGES.c.position)).mappings()
    for r in rows:
        by_session[r["session_id"]].append(row_of(MessageRow, r))
    return by_session


def _latest_runs(conn: Connection, session_ids: list[str]) -> dict[str, RunRow]:
    """The newest run of each session (ties: the greatest id).  Ranked within the sessions'
    own runs (the session index), so a read costs the same however many runs exist."""
    if not session_ids:
        return {}
    ranked = select(RUNS, func.row_number().over(
        partition_by=RUNS.c.session_id,
        order_by=(RUNS.c.created_at.desc(), RUNS.c.id.desc())).label("newest")).where(
        RUNS.c.session_id.in_(session_ids)).subquery()
    rows = conn.execute(select(ranked).where(ranked.c.newest == 1)).mappings()
    return {r["session_id"]: row_of(RunRow, r) for r in rows}


def _assemble(conn: Connection, sessions: list[SessionRow]) -> list[StoredSession]:
    ids = [s.id for s in sessions]
    messages, runs = _messages(conn, ids), _latest_runs(conn, ids)
    return [StoredSession(s, messages[s.id], runs.get(s.id)) for s in sessions]


def find_session(conn: Connection, user_id: int, session_id: str) -> StoredSession | None:
    found = _owned(conn, session_id)
    if found is None or found.user_id != user_id:
        return None
    return _assemble(conn, [found])[0]


def get_session(conn: Connection, user_id: int, session_id: str) -> StoredSession:
    found = find_session(conn, user_id, session_id)
    if found is None:
        raise missing(NOT_FOUND)
    return found


def list_sessions(conn: Connection, user_id: int, offset: int, limit: int
                  ) -> list[StoredSession]:
    """Newest ``updated_at`` first."""
    rows = conn.execute(select(SESSIONS).where(SESSIONS.c.user_id == user_id)
                        .order_by(SESSIONS.c.updated_at.desc(), SESSIONS.c.id)
                        .offset(offset).limit(limit)).mappings()
    return _assemble(conn, [row_of(SessionRow, r) for r in rows])


def delete_session(conn: Connection, user_id: int, session_id: str) -> None:
    """Messages, runs and their events go too; an unknown (or foreign) id changes nothing."""
    found = _owned(conn, session_id)
    if found is None or found.user_id != user_id:
        return
    if found.internal:
        raise conflict(IMMUTABLE)
    run_ids = select(RUNS.c.id).where(RUNS.c.session_id == session_id)
    conn.execute(delete(EVENTS).where(EVENTS.c.run_id.in_(run_ids)))
    conn.execute(delete(RUNS).where(RUNS.c.session_id == session_id))
    conn.execute(delete(MESSAGES).where(MESSAGES.c.session_id == session_id))
    conn.execute(delete(SESSIONS).where(SESSIONS.c.id == session_id))

