"""A connector task's round trip in plain DB-API statements: the insert that creates it (queued,
or born ``running`` on a local link) and the guarded update that records its result.

Why not the Core statements of ``connector_tasks``: these two run once per task, each in its own
transaction, and SQLAlchemy's execution and result processing cost more Python than SQLite
needs to run them.  Here they are fixed SQL text on a ``DriverSQL`` (``DBRunner.
driver_transaction``), with values converted exactly as the column types do (``JSONText``:
sorted-key JSON text; ``UTCDateTime``: naive UTC), so a row written here reads back the same
through either path.  The guards are the same: a result is recorded only for a task ``running``
on that device (``None`` otherwise: a retry or a foreign task changes nothing).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.store import schema
from gateway.store.connector_tasks import COMPLETED, FAILED, QUEUED, RUNNING, TaskRow
from gateway.store.driver_sql import DriverSQL, timestamp_param

COLUMNS = tuple(column.name for column in schema.connector_tasks.c)
_JSON = frozenset({"payload", "output"})
_TIMES = frozenset({"started_at", "finished_at", "created_at", "updated_at"})
_INSERT = (f"INSERT INTO connector_tasks ({', '.join(COLUMNS)}) "
           f"VALUES ({', '.join('?' for _ in COLUMNS)})")
_FINISH = ("UPDATE connector_tasks SET status = ?, result = ?, error_message = ?, output = ?, "
           "finished_at = ?, updated_at = ? WHERE id = ? AND device_id = ? AND status = ? "
           f"RETURNING {', '.join(COLUMNS)}")


def json_text(value: Any) -> str | None:
    """What ``JSONText`` stores for ``value``."""
    if value is None:
        return None
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def insert(sql: DriverSQL, *, task_id: str, user_id: int, device_id: str, action: str,
           payload: dict[str, Any], workspace_path: str, status: str, now: datetime,
           run_id: str = "", tool_call_id: str = "", cloud_sandbox_id: str = "",
           claimed_by: str | None = None) -> TaskRow:
    """``connector_tasks.create`` in one statement: with ``claimed_by`` a queued task is born
    ``running`` on that transport."""
    claimed = claimed_by is not None and status == QUEUED
    payload_text = json_text(payload)
    stamp = timestamp_param(now, sql.dialect)
    row = TaskRow(
        id=task_id, user_id=user_id, device_id=device_id, run_id=run_id,
        tool_call_id=tool_call_id, action=action, workspace_path=workspace_path,
        payload=orjson.loads(payload_text or "null"), cloud_sandbox_id=cloud_sandbox_id,
        status=RUNNING if claimed else status, result="", output=None, error_message="",
        claimed_by=claimed_by if claimed else None, started_at=now if claimed else None,
        finished_at=None, created_at=now, updated_at=now)
    params = {**row.__dict__, "payload": payload_text, "started_at": stamp if claimed else None,
              "created_at": stamp, "updated_at": stamp}
    sql.many(_INSERT, [[params[name] for name in COLUMNS]])
    return row


def finish(sql: DriverSQL, task_id: str, device_id: str, *, success: bool, result: str,
           error_message: str, output: dict[str, Any], now: datetime) -> TaskRow | None:
    """``connector_tasks.finish``: the device's result on a task running on that device."""
    stamp = timestamp_param(now, sql.dialect)
    rows = sql.all(_FINISH, (COMPLETED if success else FAILED, result, error_message,
                             json_text(output), stamp, stamp, task_id, device_id, RUNNING))
    return task_row(rows[0], sql.dialect) if rows else None


def task_row(values: tuple[Any, ...], dialect: str) -> TaskRow:
    """A ``COLUMNS``-ordered DB-API row as the column types would read it."""
    fields: dict[str, Any] = {}
    for name, value in zip(COLUMNS, values, strict=True):
        if name in _JSON:
            value = orjson.loads(value) if value else None
        elif name in _TIMES and value is not None:
            value = (datetime.fromisoformat(value) if isinstance(value, str) else value
                     ).replace(tzinfo=UTC)
        fields[name] = value
    return TaskRow(**fields)
