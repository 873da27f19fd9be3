"""Work items (agents contract §4.10, §4.12 [P-33], [P-36], [P-37]): creation with its risk
decision and reservation, the owner's queue/run/cancel transitions, and reads.

Every transition is a guarded update (``WHERE status IN (...)``) audited in the same
transaction, so a concurrent scheduler and owner never both win.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, invalid, missing
from gateway.store.studio import audit, charters, ledger, signals
from gateway.store.studio.rows import (
    AttemptRow,
    CompanyRow,
    WorkItemRow,
    numeric_key,
    row_of,
)
from gateway.studio import risk

TABLE = schema.studio_work_items
ATTEMPTS = schema.studio_work_attempts
NOT_FOUND = "Work item not found"
NOT_OPERATING = "Personal Company is not operating"
DUPLICATE_KEY = "A work item with this idempotency key already exists"
OBJECTIVE_UNAVAILABLE = "Objective is not available to this Personal Company"
NOT_AUTHORIZED = "Work item is not authorized for queueing"
NOT_READY = "Work item is not ready to run"
NOT_SCHEDULED = "Work item is not scheduled"
CANNOT_CANCEL = "Work item cannot be cancelled in its current state"
ACTIVE = ("planned", "authorized", "queued", "executing", "awaiting_review")
RETRYABLE = ("blocked", "dead_letter", "retryable_failure")
PAUSED_SUMMARY = "Studio operations paused"
CANCELLED_SUMMARY = "Work item cancelled by the owner"


@dataclass(frozen=True)
class NewWorkItem:
    title: str
    definition_of_done: str
    description: str = ""
    objective_id: int | None = None
    priority: int = 0
    idempotency_key: str = ""
    input_snapshot: str = "{}"
    allowed_tools: str = "[]"
    estimated_cost_nanos: int = 0
    due_at: datetime | None = None
    risk_level: str = "r0"


@dataclass(frozen=True)
class Stopped:
    """What a transition interrupted: the linked runs the caller must stop."""

    run_ids: list[str]


def _get(conn: Connection, company_id: int, item_id: int) -> WorkItemRow | None:
    found = conn.execute(select(TABLE).where(TABLE.c.personal_company_id == company_id,
                                             TABLE.c.id == item_id)).mappings().first()
    return row_of(WorkItemRow, found) if found is not None else None


def find(conn: Connection, company_id: int, key: str | int) -> WorkItemRow | None:
    item_id = key if isinstance(key, int) else numeric_key(key)
    return None if item_id is None else _get(conn, company_id, item_id)


def get(conn: Connection, company_id: int, key: str | int, message: str = NOT_FOUND
        ) -> WorkItemRow:
    item = find(conn, company_id, key)
    if item is None:
        raise missing(message)
    return item


def list_items(conn: Connection, company_id: int, limit: int | None = None
               ) -> list[WorkItemRow]:
    query = select(TABLE).where(TABLE.c.personal_company_id == company_id).order_by(
        TABLE.c.priority.desc(), TABLE.c.created_at.desc(), TABLE.c.id.desc())
    if limit is not None:
        query = query.limit(limit)
    return [row_of(WorkItemRow, r) for r in conn.execute(query).mappings()]


def parameters_hash(item: NewWorkItem, key: str) -> str:
    text = "\0".join((key, item.risk_level, item.title, item.allowed_tools,
                      item.input_snapshot))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def create(conn: Connection, company: CompanyRow, user_id: int, item: NewWorkItem,
           now: datetime, *, actor_type: str = "owner",
           event_type: str = "work_item.created") -> WorkItemRow:
    """§4.10 ``POST /work-items``: state, objective, risk policy, budget, key, reservation."""
    if company.state != "operating":
        raise conflict(NOT_OPERATING)
    if item.objective_id is not None:
        o = schema.studio_objectives
        if conn.execute(select(o.c.id).where(o.c.id == item.objective_id,
                                             o.c.personal_company_id == company.id)
                        ).first() is None:
            raise invalid(OBJECTIVE_UNAVAILABLE)
    charter = charters.find(conn, company.charter_revision_id)
    policy = risk.policy_for(item.risk_level, charter.approval_policy if charter else
                             risk.DEFAULT_POLICY, company.autonomy_level)
    if policy == risk.FORBIDDEN:
        raise invalid(f"Risk level {item.risk_level} is forbidden by the charter")
    ledger.check_estimate(conn, company, item.estimated_cost_nanos, now)
    key = item.idempotency_key or f"work_{secrets.token_hex(16)}"
    if conn.execute(select(TABLE.c.id).where(TABLE.c.personal_company_id == company.id,
                                             TABLE.c.idempotency_key == key)).first():
        raise conflict(DUPLICATE_KEY)
    status = "owner_decision" if policy == risk.OWNER_REQUIRED else "queued"
    inserted = conn.execute(TABLE.insert().values(
        personal_company_id=company.id, owner_user_id=user_id, objective_id=item.objective_id,
        title=item.title, description=item.description,
        definition_of_done=item.definition_of_done, status=status, priority=item.priority,
        risk_level=item.risk_level, idempotency_key=key, input_snapshot=item.input_snapshot,
        allowed_tools=item.allowed_tools, charter_revision_id=company.charter_revision_id,
        estimated_cost_nanos=item.estimated_cost_nanos,
        reserved_cost_nanos=item.estimated_cost_nanos, due_at=item.due_at, created_at=now,
        updated_at=now)).inserted_primary_key
    assert inserted is not None
    item_id = int(inserted[0])
    if item.estimated_cost_nanos > 0:
        ledger.add(conn, company.id, "reservation", item.estimated_cost_nanos, now,
                   work_item_id=item_id, reference="work_item")
    if status == "owner_decision":
        conn.execute(schema.studio_approvals.insert().values(
            personal_company_id=company.id, work_item_id=item_id, risk_level=item.risk_level,
            status="pending", requested_action=item.title,
            parameters_hash=parameters_hash(item, key), created_at=now, updated_at=now))
    audit.record(conn, company.id, event_type, now, actor_type=actor_type,
                 actor_id=str(user_id), work_item_id=item_id,
                 payload={"status": status, "risk_level": item.risk_level})
    return get(conn, company.id, item_id)


def _move(conn: Connection, item: WorkItemRow, allowed: tuple[str, ...], to: str,
          now: datetime, **values: Any) -> bool:
    done = conn.execute(update(TABLE).where(TABLE.c.id == item.id, TABLE.c.status.in_(allowed))
                        .values(status=to, updated_at=now, **values)).rowcount
    return bool(done)


def queue(conn: Connection, company: CompanyRow, user_id: int, key: str, now: datetime,
          *, refusal: str = NOT_AUTHORIZED) -> WorkItemRow:
    """``POST …/queue``: planned/authorized (and [P-36] retry states) → queued, per risk."""
    item = get(conn, company.id, key)
    if company.state != "operating" or not risk.may_queue(item.risk_level, item.status):
        raise conflict(refusal)
    if not _move(conn, item, (item.status,), "queued", now):
        raise conflict(refusal)
    event = "work_item.requeued" if item.status in RETRYABLE else "work_item.queued"
    audit.record(conn, company.id, event, now, actor_id=str(user_id), work_item_id=item.id,
                 payload={"from": item.status})
    return get(conn, company.id, item.id)


def run(conn: Connection, company: CompanyRow, user_id: int, key: str, now: datetime
        ) -> WorkItemRow:
    """``POST …/run``: queue when queueable, then report whether the scheduler has it."""
    item = get(conn, company.id, key)
    if item.status in ("planned", "authorized", *RETRYABLE):
        item = queue(conn, company, user_id, key, now, refusal=NOT_READY)
    if item.status not in ("queued", "executing"):
        raise conflict(NOT_SCHEDULED)
    return item


def executing_attempts(conn: Connection, company_id: int, work_item_id: int | None = None
                       ) -> list[AttemptRow]:
    query = select(ATTEMPTS).where(ATTEMPTS.c.personal_company_id == company_id,
                                   ATTEMPTS.c.status == "executing")
    if work_item_id is not None:
        query = query.where(ATTEMPTS.c.work_item_id == work_item_id)
    return [row_of(AttemptRow, r) for r in conn.execute(query.order_by(ATTEMPTS.c.id)).mappings()]


def _cancel_attempt(conn: Connection, attempt: AttemptRow, summary: str, now: datetime) -> bool:
    done = conn.execute(update(ATTEMPTS).where(ATTEMPTS.c.id == attempt.id,
                                               ATTEMPTS.c.status == "executing")
                        .values(status="cancelled", result_summary=summary, finished_at=now,
                                lease_expires_at=None, updated_at=now)).rowcount
    return bool(done)


def cancel(conn: Connection, company: CompanyRow, user_id: int, key: str, now: datetime
           ) -> Stopped:
    """``POST …/cancel``: anything but delivered/cancelled → cancelled; releases the
    reservation; [P-37] cancels the executing attempt and names its run to stop."""
    item = get(conn, company.id, key)
    if item.status in ("delivered", "cancelled") or not _move(
            conn, item, (item.status,), "cancelled", now, reserved_cost_nanos=0):
        raise conflict(CANNOT_CANCEL)
    ledger.release(conn, company.id, item.id, item.reserved_cost_nanos, now, "cancellation")
    runs: list[str] = []
    for attempt in executing_attempts(conn, company.id, item.id):
        if _cancel_attempt(conn, attempt, CANCELLED_SUMMARY, now) and \
                attempt.advanced_chat_run_id:
            runs.append(attempt.advanced_chat_run_id)
    audit.record(conn, company.id, "work_item.cancelled", now, actor_id=str(user_id),
                 work_item_id=item.id, payload={"from": item.status})
    return Stopped(runs)


def interrupt_all(conn: Connection, company: CompanyRow, now: datetime) -> Stopped:
    """§4.6 pause: every executing attempt → cancelled; its item back to queued (execution)
    or awaiting_review (review); signal + audit ``work_attempt.interrupted``."""
    runs: list[str] = []
    for attempt in executing_attempts(conn, company.id):
        if not _cancel_attempt(conn, attempt, PAUSED_SUMMARY, now):
            continue
        back = "awaiting_review" if attempt.kind == "review" else "queued"
        conn.execute(update(TABLE).where(TABLE.c.id == attempt.work_item_id,
                                         TABLE.c.status == "executing")
                     .values(status=back, updated_at=now))
        payload = {"attempt_id": attempt.id, "run_id": attempt.advanced_chat_run_id,
                   "status": back}
        signals.add(conn, company.id, "work_attempt.interrupted", now,
                    work_item_id=attempt.work_item_id, payload=payload)
        audit.record(conn, company.id, "work_attempt.interrupted", now, actor_type="system",
                     work_item_id=attempt.work_item_id, payload=payload)
        if attempt.advanced_chat_run_id:
            runs.append(attempt.advanced_chat_run_id)
    return Stopped(runs)

