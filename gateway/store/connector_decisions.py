"""The owner's side of connector-task approval (agents contract §1.13): the pending list.

The decision itself is ``connector_tasks.decide`` (through the links' ``ConnectorTasks``
service, so the device is woken wherever its link is).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.connector_tasks import PENDING_APPROVAL, TaskRow, get_for_user

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


__all__ = ["get_for_user", "pending_for_run"]
