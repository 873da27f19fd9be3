"""Assistant runs and their events (agents contract §1.9, §1.10).

State changes are guarded updates (``... WHERE status IN ('queued', 'running')``) so a stop, a
finish and a lease expiry racing each other leave exactly one terminal state.  Event ``seq``
numbers are the run's stored maximum + 1, taken in the appending transaction; the unique
``(run_id, seq)`` index refuses a duplicate rather than storing two events with one number.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.rows import (
    ACTIVE_RUN_STATUSES,
    RunEventRow,
    RunRow,
    row_of,
)

RUNS = schema.assistant_runs
EVENTS = schema.assistant_run_events
#: most events one ``GET /runs/:id/events`` answers
EVENT_PAGE = 200


#: the columns a new run has unless ``create_run`` is given them (the table's defaults)
NEW_RUN: dict[str, Any] = {
    "status": "queued", "status_message": "", "current_round": 0, "error_message": "",
    "cost_nanos": 0, "tool_calls": 0, "tool_call_details": [], "request": {}, "node_name": "",
    "lease_expires_at": None, "deadline_at": None, "started_at": None, "finished_at": None}


def run_row(values: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A new run's row: ``values`` over the defaults of a ``queued`` run."""
    return {**NEW_RUN, **values, "created_at": now, "updated_at": now}


def create_run(conn: Connection, values: dict[str, Any], now: datetime) -> RunRow:
    """Insert a run (``values`` holds at least id, user_id, session_id, assistant_message_id,
    mode); it starts ``queued``.  The row is answered as written, not read back."""
    row = run_row(values, now)
    conn.execute(RUNS.insert(), row)
    return row_of(RunRow, row)


def find_run(conn: Connection, run_id: str, user_id: int | None = None) -> RunRow | None:
    """The run; with ``user_id`` only if that user owns it."""
    query = select(RUNS).where(RUNS.c.id == run_id)
    if user_id is not None:
        query = query.where(RUNS.c.user_id == user_id)
    found = conn.execute(query).mappings().first()
    return row_of(RunRow, found) if found is not None else None


def active_runs(conn: Connection, session_id: str) -> list[RunRow]:
    rows = conn.execute(select(RUNS).where(RUNS.c.session_id == session_id,
                                           RUNS.c.status.in_(ACTIVE_RUN_STATUSES))
                        .order_by(RUNS.c.created_at)).mappings()
    return [row_of(RunRow, r) for r in rows]


def transition(conn: Connection, run_id: str, values: dict[str, Any], now: datetime, *,
               from_statuses: Iterable[str] = ACTIVE_RUN_STATUSES) -> bool:
    """Apply ``values`` only while the run's status is one of ``from_statuses``."""
    result = conn.execute(update(RUNS).where(RUNS.c.id == run_id,
                                             RUNS.c.status.in_(list(from_statuses)))
                          .values(**values, updated_at=now))
    return bool(result.rowcount)


def append_event(conn: Connection, run_id: str, session_id: str, event: str, payload: Any,
                 now: datetime) -> RunEventRow:
    last = conn.execute(select(func.max(EVENTS.c.seq)).where(EVENTS.c.run_id == run_id)
                        ).scalar()
    values = {"run_id": run_id, "session_id": session_id, "seq": int(last or 0) + 1,
              "event": event, "payload": payload, "created_at": now}
    key = conn.execute(EVENTS.insert().values(**values)).inserted_primary_key
    assert key is not None
    return RunEventRow(id=int(key[0]), **values)


def events_after(conn: Connection, run_id: str, after: int, user_id: int | None = None,
                 limit: int = EVENT_PAGE) -> list[RunEventRow]:
    """Events with ``seq > after``, ascending, at most ``limit`` (``[]`` for unknown runs)."""
    query = select(EVENTS).where(EVENTS.c.run_id == run_id, EVENTS.c.seq > after)
    if user_id is not None:
        query = query.where(EVENTS.c.run_id.in_(
            select(RUNS.c.id).where(RUNS.c.id == run_id, RUNS.c.user_id == user_id)))
    rows = conn.execute(query.order_by(EVENTS.c.seq).limit(limit)).mappings()
    return [row_of(RunEventRow, r) for r in rows]
