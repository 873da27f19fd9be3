"""Queries on connector tasks (agents contract §1.13): the queue every device transport shares.

Why every transition is a conditional UPDATE checked by its rowcount: a task can be offered to
a device over a WebSocket on one node while the same device long-polls another node; exactly one
``queued -> running`` claim wins, so a task is never handed out twice.  Finishing is guarded the
same way (``WHERE status = 'running' AND device_id = :device``) so a retried or foreign result
changes nothing.  ``claimed_by`` names the transport that holds a running task ("http" or the
WebSocket link id) so a closing link fails exactly its own tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection, RowMapping

from gateway.store import schema

PENDING_APPROVAL = "pending_approval"
QUEUED = "queued"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
ACTIVE = (PENDING_APPROVAL, QUEUED, RUNNING)
#: claimed over HTTP long-poll (WebSocket claims carry their link id)
HTTP_CLAIM = "http"


@dataclass(frozen=True)
class TaskRow:
    """One ``connector_tasks`` row."""

    id: str
    user_id: int
    device_id: str
    run_id: str
    tool_call_id: str
    action: str
    workspace_path: str
    payload: dict[str, Any]
    cloud_sandbox_id: str
    status: str
    result: str
    output: dict[str, Any] | None
    error_message: str
    claimed_by: str | None
    started_at: datetime | None
    finished_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: RowMapping) -> TaskRow:
        return cls(**{name: row[name] for name in cls.__dataclass_fields__})


def _one(conn: Connection, *where: Any) -> TaskRow | None:
    row = conn.execute(select(schema.connector_tasks).where(*where)).mappings().first()
    return TaskRow.from_row(row) if row else None


def get(conn: Connection, task_id: str) -> TaskRow | None:
    return _one(conn, schema.connector_tasks.c.id == task_id)


def get_for_user(conn: Connection, user_id: int, task_id: str) -> TaskRow | None:
    t = schema.connector_tasks
    return _one(conn, t.c.id == task_id, t.c.user_id == user_id)


def list_for_device(conn: Connection, device_id: str, limit: int) -> list[TaskRow]:
    """The device's tasks, newest first."""
    t = schema.connector_tasks
    rows = conn.execute(select(t).where(t.c.device_id == device_id).order_by(
        t.c.created_at.desc(), t.c.id.desc()).limit(limit)).mappings().all()
    return [TaskRow.from_row(row) for row in rows]


def create(conn: Connection, *, task_id: str, user_id: int, device_id: str, action: str,
           payload: dict[str, Any], workspace_path: str, status: str, now: datetime,
           run_id: str = "", tool_call_id: str = "", cloud_sandbox_id: str = "") -> TaskRow:
    conn.execute(schema.connector_tasks.insert().values(
        id=task_id, user_id=user_id, device_id=device_id, run_id=run_id,
        tool_call_id=tool_call_id, action=action, workspace_path=workspace_path,
        payload=payload, cloud_sandbox_id=cloud_sandbox_id, status=status,
        created_at=now, updated_at=now,
    ))
    row = get(conn, task_id)
    assert row is not None
    return row


def _queue_filter(device_id: str, owner_id: int | None) -> list[Any]:
    t = schema.connector_tasks
    where = [t.c.device_id == device_id, t.c.status == QUEUED]
    if owner_id is not None:
        # a user device only ever runs its owner's tasks; host devices run every user's
        where.append(t.c.user_id == owner_id)
    return where


def claim_next(conn: Connection, device_id: str, owner_id: int | None, claimed_by: str,
               now: datetime, actions: frozenset[str] | None = None,
               exclude_actions: frozenset[str] | None = None) -> TaskRow | None:
    """Claim the oldest queued task of the device (``queued -> running``), or ``None``."""
    t = schema.connector_tasks
    where = _queue_filter(device_id, owner_id)
    if actions is not None:
        where.append(t.c.action.in_(sorted(actions)))
    if exclude_actions:
        where.append(t.c.action.not_in(sorted(exclude_actions)))
    candidates = conn.execute(select(t.c.id).where(*where).order_by(
        t.c.created_at, t.c.id).limit(8)).scalars().all()
    for task_id in candidates:
        if claim(conn, task_id, claimed_by, now):
            return get(conn, task_id)
    return None


def claim(conn: Connection, task_id: str, claimed_by: str, now: datetime) -> bool:
    """The one atomic claim: true only for the single writer that moved the task."""
    t = schema.connector_tasks
    return bool(conn.execute(update(t).where(t.c.id == task_id, t.c.status == QUEUED).values(
        status=RUNNING, claimed_by=claimed_by, started_at=now, updated_at=now)).rowcount)


def unclaim(conn: Connection, task_id: str, claimed_by: str, now: datetime) -> bool:
    """A dispatch frame could not be written: the task goes back to the queue."""
    t = schema.connector_tasks
    return bool(conn.execute(update(t).where(
        t.c.id == task_id, t.c.status == RUNNING, t.c.claimed_by == claimed_by).values(
        status=QUEUED, claimed_by=None, started_at=None, updated_at=now)).rowcount)


def finish(conn: Connection, task_id: str, device_id: str, *, success: bool, result: str,
           error_message: str, output: dict[str, Any], now: datetime) -> TaskRow | None:
    """Record the device's result; ``None`` when the task is not running on this device."""
    t = schema.connector_tasks
    changed = conn.execute(update(t).where(
        t.c.id == task_id, t.c.device_id == device_id, t.c.status == RUNNING).values(
        status=COMPLETED if success else FAILED, result=result, error_message=error_message,
        output=output, finished_at=now, updated_at=now)).rowcount
    return get(conn, task_id) if changed else None


def fail(conn: Connection, task_id: str, message: str, now: datetime,
         statuses: tuple[str, ...] = ACTIVE) -> TaskRow | None:
    """Fail an active task (cancel, timeout); returns the row as it was before, or ``None``."""
    before = get(conn, task_id)
    if before is None or before.status not in statuses:
        return None
    t = schema.connector_tasks
    changed = conn.execute(update(t).where(
        t.c.id == task_id, t.c.status == before.status).values(
        status=FAILED, error_message=message, finished_at=now, updated_at=now)).rowcount
    return before if changed else None


def fail_claimed_by(conn: Connection, claimed_by: str, message: str,
                    now: datetime) -> list[TaskRow]:
    """A link closed: its running tasks fail.  Returns the tasks that were failed."""
    t = schema.connector_tasks
    rows = conn.execute(select(t).where(
        t.c.claimed_by == claimed_by, t.c.status == RUNNING)).mappings().all()
    failed = []
    for row in rows:
        changed = conn.execute(update(t).where(t.c.id == row["id"], t.c.status == RUNNING).values(
            status=FAILED, error_message=message, finished_at=now, updated_at=now)).rowcount
        if changed:
            failed.append(TaskRow.from_row(row))
    return failed


def queued_exists(conn: Connection, device_id: str, owner_id: int | None) -> bool:
    t = schema.connector_tasks
    return conn.execute(select(t.c.id).where(
        *_queue_filter(device_id, owner_id)).limit(1)).first() is not None


def devices_with_queued(conn: Connection) -> list[str]:
    """Devices that have queued tasks now (the 1 s re-check of every node)."""
    t = schema.connector_tasks
    return list(conn.execute(select(t.c.device_id).where(t.c.status == QUEUED).distinct())
                .scalars().all())


def statuses(conn: Connection, task_ids: list[str]) -> dict[str, str]:
    t = schema.connector_tasks
    found: dict[str, str] = {}
    for start in range(0, len(task_ids), 500):
        rows = conn.execute(select(t.c.id, t.c.status).where(
            t.c.id.in_(task_ids[start:start + 500]))).all()
        found.update({row[0]: row[1] for row in rows})
    return found


def decide(conn: Connection, task_id: str, approved: bool, denial: str,
           now: datetime) -> TaskRow | None:
    """``pending_approval -> queued`` (approved) or ``-> failed`` with ``denial``; ``None``
    when the task was not awaiting a decision."""
    t = schema.connector_tasks
    values: dict[str, Any] = ({"status": QUEUED} if approved else
                              {"status": FAILED, "error_message": denial, "finished_at": now})
    changed = conn.execute(update(t).where(
        t.c.id == task_id, t.c.status == PENDING_APPROVAL).values(
        **values, updated_at=now)).rowcount
    return get(conn, task_id) if changed else None
