"""Studio connector approvals (agents contract §4.13): the studio's connector tasks waiting in
``pending_approval`` -- found through the run ids of its work attempts -- and the owner's
decision on one (actor ``owner``, denial ``denied by owner: Studio owner decision``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import connector_decisions, connector_tasks, schema
from gateway.store.assistant.refused import Refused, missing
from gateway.store.connector_tasks import PENDING_APPROVAL, QUEUED
from gateway.store.studio import audit
from gateway.store.studio.rows import CompanyRow

NOT_FOUND = "Connector approval not found"
NOT_THIS_STUDIO = "Connector approval is not owned by this Studio"
DECIDED = "Connector approval has already been decided"
OWNER_OPINION = "Studio owner decision"


@dataclass(frozen=True)
class PendingConnectorTask:
    id: str
    work_item_id: int
    work_item_title: str
    run_id: str
    action: str
    workspace_path: str
    payload: dict[str, Any]
    created_at: datetime


def pending(conn: Connection, company_id: int) -> list[PendingConnectorTask]:
    t, a, w = schema.connector_tasks, schema.studio_work_attempts, schema.studio_work_items
    rows = conn.execute(
        select(t.c.id, t.c.run_id, t.c.action, t.c.workspace_path, t.c.payload, t.c.created_at,
               w.c.id.label("work_item_id"), w.c.title)
        .join(a, (a.c.advanced_chat_run_id == t.c.run_id) & (a.c.advanced_chat_run_id != ""))
        .join(w, w.c.id == a.c.work_item_id)
        .where(a.c.personal_company_id == company_id, t.c.status == PENDING_APPROVAL)
        .order_by(t.c.created_at, t.c.id)).mappings().all()
    return [PendingConnectorTask(id=r["id"], work_item_id=r["work_item_id"],
                                 work_item_title=r["title"], run_id=r["run_id"],
                                 action=r["action"], workspace_path=r["workspace_path"],
                                 payload=r["payload"] or {}, created_at=r["created_at"])
            for r in rows]


def decide(conn: Connection, company: CompanyRow, user_id: int, task_id: str, approved: bool,
           now: datetime) -> tuple[str, str]:
    """The task's new status (``queued`` / ``failed``) and its device (to wake)."""
    task = connector_decisions.get_for_user(conn, user_id, task_id)
    if task is None:
        raise missing(NOT_FOUND)
    a = schema.studio_work_attempts
    attempt = conn.execute(select(a.c.work_item_id).where(
        a.c.personal_company_id == company.id, a.c.advanced_chat_run_id == task.run_id,
        a.c.advanced_chat_run_id != "")).first()
    if attempt is None:
        raise missing(NOT_THIS_STUDIO)
    if task.status != PENDING_APPROVAL or connector_tasks.decide(
            conn, task_id, approved, f"denied by owner: {OWNER_OPINION}", now) is None:
        current = connector_decisions.get_for_user(conn, user_id, task_id)
        raise Refused(409, DECIDED, {"status": current.status if current else task.status})
    status = QUEUED if approved else "failed"
    audit.record(conn, company.id, f"connector_approval.{status}", now, actor_id=str(user_id),
                 work_item_id=attempt[0], payload={"connector_task_id": task_id})
    return status, task.device_id
