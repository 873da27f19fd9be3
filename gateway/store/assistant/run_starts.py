"""The one transaction of an assistant completion's 202 (agents contract §1.7, §1.11).

The session's active runs are interrupted, the session is saved with the request's messages
and the empty assistant message, and the run is created ``queued`` -- together, so a client
never sees the session without its run or a second active run in it.

Why its own module, and why nothing is read back: this transaction is a cost every run pays
before its first round, and with many runs starting at once it queues in front of the other
runs' rounds.  The session, its messages and the run are exactly the values written (plus the
table defaults), so they are answered as such; the session's re-read with its newest run was
the dearest statement of a run's start.  A new session has no runs and no messages, so
there is nothing to interrupt, look up or delete, and its three inserts go to the
transaction's own DB-API cursor (``driver_rows``: values bound as the column types do) rather
than through Core, whose Python per statement cost more than SQLite's work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant import run_outcomes
from gateway.store.assistant.driver_rows import DriverTable
from gateway.store.assistant.rows import MessageRow, RunEventRow, RunRow, SessionRow, row_of
from gateway.store.assistant.runs import active_runs, create_run, run_row
from gateway.store.assistant.sessions import (
    StoredSession,
    check_writable,
    message_rows,
    replace_messages,
)
from gateway.store.driver_sql import DriverSQL

SESSIONS = schema.assistant_sessions
_SESSIONS = DriverTable(SESSIONS)
_MESSAGES = DriverTable(schema.assistant_messages)
_RUNS = DriverTable(schema.assistant_runs)

#: the columns a new session has unless it is given them (the table's defaults)
NEW_SESSION: dict[str, Any] = {
    "title": "", "run_mode": "chat", "agent_id": "", "agent_group_id": "", "skill_ids": [],
    "mcp_server_ids": [], "knowledge_base_ids": [], "connector_device_id": "",
    "connector_workspace_path": "", "cloud_sandbox_id": "", "connector_approval_mode": "manual",
    "connector_command_prefixes": [], "model_name": "", "user_channel_id": 0, "max_tokens": 0,
    "temperature": None, "reasoning_effort": "", "auto_compress_context": False,
    "disabled_tool_groups": [], "folder_id": "", "metadata": {}, "internal": False}


@dataclass(frozen=True)
class RunStart:
    #: the session as saved, its newest run the new one
    session: StoredSession
    run: RunRow
    #: the interrupted runs' ``cancelled`` / ``user_interrupted`` events, and their ids
    events: list[RunEventRow]
    stopped: list[str]


def _insert_messages(sql: DriverSQL, session_id: str, messages: list[dict[str, Any]],
                     now: datetime) -> list[MessageRow]:
    """``sessions.insert_messages`` on the driver: the same rows, answered as written."""
    rows = message_rows(session_id, messages, now)
    _MESSAGES.insert(sql, rows)
    return [row_of(MessageRow, row) for row in rows]


def _create_run(sql: DriverSQL, values: dict[str, Any], now: datetime) -> RunRow:
    """``runs.create_run`` on the driver: the same row, answered as written."""
    row = run_row(values, now)
    _RUNS.insert(sql, [row])
    return row_of(RunRow, row)


def start_run(conn: Connection, user_id: int, session_id: str, columns: dict[str, Any],
              messages: list[dict[str, Any]], run: dict[str, Any], now: datetime, *,
              generated: bool = False) -> RunStart:
    """Interrupt, save, create (``columns``: the session's; ``run``: the new run's values).
    ``generated``: the session id was just made up (80 random bits), so no session has it
    and there is nothing to look up."""
    existing = None if generated else check_writable(conn, user_id, session_id,
                                                     allow_active_run=True)
    events: list[RunEventRow] = []
    stopped: list[str] = []
    if existing is None:
        row = {**NEW_SESSION, **columns, "id": session_id, "user_id": user_id,
               "created_at": now, "updated_at": now}
        session = SessionRow(**row)
        sql = DriverSQL(conn)  # the rows as written, on this transaction's own cursor
        try:
            _SESSIONS.insert(sql, [row])
            saved = _insert_messages(sql, session_id, messages, now)
            created = _create_run(sql, run, now)
        finally:
            sql.close()
        return RunStart(StoredSession(session, saved, created), created, events, stopped)
    for active in active_runs(conn, session_id):
        events += run_outcomes.cancel(conn, active, now, interrupted=True)
        stopped.append(active.id)
    conn.execute(update(SESSIONS).where(SESSIONS.c.id == session_id)
                 .values(**columns, updated_at=now))
    session = replace(existing, **columns, updated_at=now)
    saved = replace_messages(conn, session_id, messages, now)
    created = create_run(conn, run, now)
    return RunStart(StoredSession(session, saved, created), created, events, stopped)
