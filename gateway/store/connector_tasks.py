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
from functools import cache
from typing import Any

from sqlalchemy import Update, bindparam, select, update
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
           run_id: str = "", tool_call_id: str = "", cloud_sandbox_id: str = "",
           claimed_by: str | None = None) -> TaskRow:
    """Insert a task; with ``claimed_by`` it is born ``running`` on that transport (the
    creating node hands it straight to a local link: nobody else ever sees it queued)."""
    claimed = claimed_by is not None and status == QUEUED
    row = conn.execute(_INSERT, {
        "id": task_id, "user_id": user_id, "device_id": device_id, "run_id": run_id,
        "tool_call_id": tool_call_id, "action": action, "workspace_path": workspace_path,
        "payload": payload, "cloud_sandbox_id": cloud_sandbox_id,
        "status": RUNNING if claimed else status, "claimed_by": claimed_by if claimed else None,
        "started_at": now if claimed else None, "created_at": now, "updated_at": now,
    }).mappings().one()
    return TaskRow.from_row(row)


# The round trip's statements are built once: building and cache-keying a Core statement costs
# more CPU than SQLite takes to run it.
_T = schema.connector_tasks
_INSERT = _T.insert().returning(*_T.c)
_CLAIMED = {"status": RUNNING, "claimed_by": bindparam("p_claimed_by"),
            "started_at": bindparam("p_now"), "updated_at": bindparam("p_now")}
_CLAIM = update(_T).where(_T.c.id == bindparam("p_id"), _T.c.status == QUEUED).values(
    _CLAIMED).returning(*_T.c)
_FINISH = update(_T).where(
    _T.c.id == bindparam("p_id"), _T.c.device_id == bindparam("p_device_id"),
    _T.c.status == RUNNING).values(
    status=bindparam("p_status"), result=bindparam("p_result"),
    error_message=bindparam("p_error_message"), output=bindparam("p_output"),
    finished_at=bindparam("p_now"), updated_at=bindparam("p_now")).returning(*_T.c)


@cache
def _claim_next(dialect: str, for_owner: bool, actions: frozenset[str] | None,
                exclude_actions: frozenset[str] | None) -> Update:
    where = [_T.c.device_id == bindparam("p_device_id"), _T.c.status == QUEUED]
    if for_owner:
        where.append(_T.c.user_id == bindparam("p_owner_id"))
    if actions is not None:
        where.append(_T.c.action.in_(sorted(actions)))
    if exclude_actions:
        where.append(_T.c.action.not_in(sorted(exclude_actions)))
    oldest = select(_T.c.id).where(*where).order_by(_T.c.created_at, _T.c.id).limit(1)
    if dialect == "postgresql":
        oldest = oldest.with_for_update(skip_locked=True)
    return update(_T).where(_T.c.id == oldest.scalar_subquery(), _T.c.status == QUEUED).values(
        _CLAIMED).returning(*_T.c)


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
    """Claim the oldest queued task of the device (``queued -> running``), or ``None``.

    One ``UPDATE … WHERE id = (oldest queued) AND status = 'queued' RETURNING``: on SQLite the
    write lock is held for the whole statement; on PostgreSQL the subquery locks the row it
    picks (``FOR UPDATE SKIP LOCKED``: a row another claimer holds is passed over, a row that
    stopped being queued is re-checked and dropped before ``LIMIT``), so two claimers never
    get the same task and neither waits on the other."""
    statement = _claim_next(conn.dialect.name, owner_id is not None, actions,
                            exclude_actions or None)
    params: dict[str, Any] = {"p_device_id": device_id, "p_claimed_by": claimed_by, "p_now": now}
    if owner_id is not None:
        params["p_owner_id"] = owner_id
    row = conn.execute(statement, params).mappings().first()
    return TaskRow.from_row(row) if row else None


def queued_among(conn: Connection, device_ids: list[str]) -> set[str]:
    """Which of the devices have a queued task at all (any owner, any action): many links
    claiming together (``gateway.links.claim_batch``) make one read instead of a claim each
    for devices with nothing queued."""
    if not device_ids:
        return set()
    rows = conn.execute(select(_T.c.device_id).where(
        _T.c.device_id.in_(device_ids), _T.c.status == QUEUED).distinct())
    return {row[0] for row in rows}


def claim(conn: Connection, task_id: str, claimed_by: str, now: datetime) -> TaskRow | None:
    """The one atomic claim of a known task: its row only for the single writer that moved
    it, else ``None``."""
    row = conn.execute(_CLAIM, {"p_id": task_id, "p_claimed_by": claimed_by,
                                "p_now": now}).mappings().first()
    return TaskRow.from_row(row) if row else None


def unclaim(conn: Connection, task_id: str, claimed_by: str, now: datetime) -> bool:
    """A dispatch frame could not be written: the task goes back to the queue."""
    t = schema.connector_tasks
    return bool(conn.execute(update(t).where(
        t.c.id == task_id, t.c.status == RUNNING, t.c.claimed_by == claimed_by).values(
        status=QUEUED, claimed_by=None, started_at=None, updated_at=now)).rowcount)


def finish(conn: Connection, task_id: str, device_id: str, *, success: bool, result: str,
           error_message: str, output: dict[str, Any], now: datetime) -> TaskRow | None:
    """Record the device's result; ``None`` when the task is not running on this device."""
    row = conn.execute(_FINISH, {
        "p_id": task_id, "p_device_id": device_id, "p_status": COMPLETED if success else FAILED,
        "p_result": result, "p_error_message": error_message, "p_output": output,
        "p_now": now}).mappings().first()
    return TaskRow.from_row(row) if row else None


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
           now: datetime, payload: dict[str, Any] | None = None) -> TaskRow | None:
    """``pending_approval -> queued`` (approved, with ``payload`` when the owner adjusted the
    input) or ``-> failed`` with ``denial``; ``None`` when the task was not awaiting a
    decision."""
    t = schema.connector_tasks
    values: dict[str, Any] = ({"status": QUEUED} if approved else
                              {"status": FAILED, "error_message": denial, "finished_at": now})
    if approved and payload is not None:
        values["payload"] = payload
    changed = conn.execute(update(t).where(
        t.c.id == task_id, t.c.status == PENDING_APPROVAL).values(
        **values, updated_at=now)).rowcount
    return get(conn, task_id) if changed else None


def active_for_run(conn: Connection, run_id: str) -> list[TaskRow]:
    """The run's tasks that are still active (a stop fails them and tells their devices)."""
    t = schema.connector_tasks
    rows = conn.execute(select(t).where(t.c.run_id == run_id, t.c.status.in_(ACTIVE))
                        .order_by(t.c.created_at, t.c.id)).mappings()
    return [TaskRow.from_row(row) for row in rows]
