"""How a run ends, in SQL: fail, stop and the lease sweep (agents contract §1.9-§1.11); a
finish goes with the run's events (``event_batches``).

A separate module from ``runs`` (the record and its events) because these writes touch three
tables at once -- the run, its assistant message and its connector tasks -- and must do so in
the transaction that moves the run to its terminal state.  Every move is a guarded update
(``WHERE status IN ('queued', 'running')``): a stop, a finish and a lease expiry racing each
other leave exactly one terminal state and one terminal event.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import connector_tasks, schema
from gateway.store.assistant.rows import ACTIVE_RUN_STATUSES, RunEventRow, RunRow, row_of
from gateway.store.assistant.runs import append_event, find_run, transition

RUNS = schema.assistant_runs
MESSAGES = schema.assistant_messages
TASKS = schema.connector_tasks

STOPPED_CONTENT = "Stopped"
CANCELLED_RESULT = "Cancelled by user."
CANCELLED_TASK = "cancelled by user"


def update_message(conn: Connection, session_id: str, message_id: str, values: dict[str, Any],
                   now: datetime, *, only_if_empty: bool = False) -> None:
    """Write the run's assistant message (``only_if_empty``: only while it has no content)."""
    query = update(MESSAGES).where(MESSAGES.c.session_id == session_id,
                                   MESSAGES.c.id == message_id)
    if only_if_empty:
        query = query.where(MESSAGES.c.content == "")
    conn.execute(query.values(**values, updated_at=now))


def fail(conn: Connection, run: RunRow, error: str, now: datetime, *, cost_nanos: int = 0,
         details: list[dict[str, Any]] | None = None) -> RunEventRow | None:
    """``queued|running -> failed``; the ``error`` event (None: already ended)."""
    values: dict[str, Any] = {"status": "failed", "status_message": "failed",
                              "error_message": error, "finished_at": now,
                              "lease_expires_at": None, "cost_nanos": cost_nanos}
    if details is not None:
        values.update(tool_call_details=details, tool_calls=len(details))
    if not transition(conn, run.id, values, now):
        record_cost(conn, run.id, cost_nanos, now)
        return None
    update_message(conn, run.session_id, run.assistant_message_id, {"content": error}, now,
                   only_if_empty=True)
    _fail_tasks(conn, run.id, error, now)
    return append_event(conn, run.id, run.session_id, "error", {"error": error}, now)


def record_cost(conn: Connection, run_id: str, cost_nanos: int, now: datetime) -> None:
    """A run stopped from elsewhere still owes what its model calls cost."""
    if cost_nanos:
        conn.execute(update(RUNS).where(RUNS.c.id == run_id, RUNS.c.cost_nanos < cost_nanos)
                     .values(cost_nanos=cost_nanos, updated_at=now))


def _fail_tasks(conn: Connection, run_id: str, message: str, now: datetime) -> list[str]:
    ids = [task_id for (task_id,) in conn.execute(select(TASKS.c.id).where(
        TASKS.c.run_id == run_id, TASKS.c.status.in_(connector_tasks.ACTIVE)))]
    for task_id in ids:
        connector_tasks.fail(conn, task_id, message, now)
    return ids


def cancel(conn: Connection, run: RunRow, now: datetime, *, interrupted: bool = False
           ) -> list[RunEventRow]:
    """§1.11: the run ``cancelled`` with everything it left open; its events (``[]`` when it
    had ended already)."""
    if not transition(conn, run.id, {"status": "cancelled", "status_message": "cancelled",
                                     "error_message": "", "finished_at": now,
                                     "lease_expires_at": None}, now):
        return []
    current = find_run(conn, run.id)
    assert current is not None
    details = [
        {**d, "status": "error", "result": CANCELLED_RESULT}
        if d.get("status") in ("running", "approval_required") else d
        for d in current.tool_call_details]
    conn.execute(update(RUNS).where(RUNS.c.id == run.id).values(
        tool_call_details=details, tool_calls=len(details)))
    update_message(conn, run.session_id, run.assistant_message_id,
                   {"content": STOPPED_CONTENT}, now, only_if_empty=True)
    _fail_tasks(conn, run.id, CANCELLED_TASK, now)
    events = [append_event(conn, run.id, run.session_id, "status", {"message": "cancelled"},
                           now)]
    if interrupted:
        events.append(append_event(conn, run.id, run.session_id, "status", {
            "message": "user_interrupted", "code": "USER_INTERRUPTED"}, now))
    return events


def expired(conn: Connection, now: datetime, limit: int = 100) -> list[RunRow]:
    """Active runs whose node stopped renewing their lease."""
    rows = conn.execute(select(RUNS).where(
        RUNS.c.status.in_(ACTIVE_RUN_STATUSES), RUNS.c.lease_expires_at.is_not(None),
        RUNS.c.lease_expires_at < now).order_by(RUNS.c.lease_expires_at).limit(limit)
    ).mappings()
    return [row_of(RunRow, r) for r in rows]


def renew(conn: Connection, run_ids: list[str], node_name: str, until: datetime) -> None:
    if run_ids:
        conn.execute(update(RUNS).where(
            RUNS.c.id.in_(run_ids), RUNS.c.node_name == node_name,
            RUNS.c.status.in_(ACTIVE_RUN_STATUSES)).values(lease_expires_at=until))
