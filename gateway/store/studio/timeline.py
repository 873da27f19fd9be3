"""A work item's timeline (agents contract §4.10): the item, its attempts by number, artifacts,
handoffs and audit events oldest first -- and its latest internal session (§4.16)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import missing
from gateway.store.assistant.rows import RunRow
from gateway.store.assistant.runs import find_run
from gateway.store.assistant.sessions import StoredSession, find_session
from gateway.store.studio import audit, work_items
from gateway.store.studio.rows import (
    ArtifactRow,
    AttemptRow,
    AuditEventRow,
    HandoffRow,
    WorkItemRow,
    row_of,
)


@dataclass(frozen=True)
class Timeline:
    work_item: WorkItemRow
    attempts: list[AttemptRow]
    artifacts: list[ArtifactRow]
    handoffs: list[HandoffRow]
    events: list[AuditEventRow]


def attempts_of(conn: Connection, work_item_id: int) -> list[AttemptRow]:
    t = schema.studio_work_attempts
    rows = conn.execute(select(t).where(t.c.work_item_id == work_item_id)
                        .order_by(t.c.attempt_number)).mappings()
    return [row_of(AttemptRow, r) for r in rows]


def timeline(conn: Connection, company_id: int, key: str) -> Timeline:
    item = work_items.get(conn, company_id, key)
    a, h = schema.studio_artifacts, schema.studio_handoffs
    artifacts = [row_of(ArtifactRow, r) for r in conn.execute(
        select(a).where(a.c.work_item_id == item.id).order_by(a.c.id)).mappings()]
    handoffs = [row_of(HandoffRow, r) for r in conn.execute(
        select(h).where(h.c.work_item_id == item.id).order_by(h.c.id)).mappings()]
    return Timeline(item, attempts_of(conn, item.id), artifacts, handoffs,
                    audit.for_work_item(conn, company_id, item.id))


NO_SESSION = "No internal Studio session exists for this work item"
RUN_NOT_FOUND = "Internal Studio run not found"


@dataclass(frozen=True)
class InternalSession:
    attempt: AttemptRow
    run: RunRow
    session: StoredSession


def internal_session(conn: Connection, company_id: int, user_id: int, key: str
                     ) -> InternalSession:
    """§4.10: the latest attempt with a run, its run and its (read-only) session."""
    item = work_items.get(conn, company_id, key)
    linked = [a for a in attempts_of(conn, item.id) if a.advanced_chat_run_id]
    if not linked:
        raise missing(NO_SESSION)
    attempt = linked[-1]
    run = find_run(conn, attempt.advanced_chat_run_id, user_id)
    session = find_session(conn, user_id, run.session_id) if run is not None else None
    if run is None or session is None:
        raise missing(RUN_NOT_FOUND)
    return InternalSession(attempt, run, session)
