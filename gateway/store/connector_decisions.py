"""The owner's side of connector-task approval (agents contract §1.13): pending list, decision.

A decision is one guarded update (``WHERE status = 'pending_approval'``): two decisions racing
each other (two tabs, two nodes) leave exactly one, and the loser learns the current status.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.connector_tasks import FAILED, PENDING_APPROVAL, QUEUED, TaskRow, get_for_user

TASKS = schema.connector_tasks
DEVICES = schema.connector_devices


def pending_for_run(conn: Connection, user_id: int, run_id: str
                    ) -> list[tuple[TaskRow, str]]:
    """The run's tasks awaiting a decision, oldest first, with their device's name."""
    rows = conn.execute(
        select(TASKS, DEVICES.c.name.label("device_name"))
        .join(DEVICES, DEVICES.c.id == TASKS.c.device_id, isouter=True)
        .where(TASKS.c.run_id == run_id, TASKS.c.user_id == user_id,
               TASKS.c.status == PENDING_APPROVAL)
        .order_by(TASKS.c.created_at, TASKS.c.id)).mappings().all()
    return [(TaskRow.from_row(row), row["device_name"] or "") for row in rows]


def decide(conn: Connection, task_id: str, approved: bool, payload: dict[str, Any] | None,
           actor: str, now: datetime, opinion: str = "") -> bool:
    """``pending_approval -> queued`` (with ``payload`` when adjusted) or ``-> failed``."""
    values: dict[str, Any] = {"updated_at": now}
    if approved:
        values["status"] = QUEUED
        if payload is not None:
            values["payload"] = payload
    else:
        values.update(status=FAILED, finished_at=now, error_message=(
            f"denied by {actor}: {opinion}" if opinion else f"denied by {actor}"))
    return bool(conn.execute(update(TASKS).where(
        TASKS.c.id == task_id, TASKS.c.status == PENDING_APPROVAL).values(**values)).rowcount)


__all__ = ["decide", "get_for_user", "pending_for_run"]
