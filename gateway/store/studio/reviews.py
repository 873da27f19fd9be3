"""Review outcomes of studio work (agents contract §4.8 "Review start").

A review attempt ends one of two ways: the chief records a decision with the
``studio_review_work`` tool (``record_decision``), or its run ends first
(``review_run_ended``: the attempt and item are ``blocked``).  Both are conditional on the
attempt still ``executing``, so whichever comes first wins and the other changes nothing.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.assistant.refused import conflict, invalid
from gateway.store.studio import audit
from gateway.store.studio.control import (
    ARTIFACTS,
    ATTEMPTS,
    ITEMS,
    MAX_SUMMARY,
    add_ledger,
    set_attempt,
    set_item,
)
from gateway.store.studio.rows import AttemptRow, row_of

DECISIONS = ("verified", "needs_revision", "blocked")
NEEDS_REVIEWER = "Chief must receive a reviewer delegation result before recording review"
BAD_DECISION = "decision must be verified, needs_revision or blocked"
NOT_REVIEWING = "This run is not an executing Studio review"
NO_DECISION = "Reviewer did not record a decision"


def reviewer_consulted(conn: Connection, run_id: str) -> bool:
    """True when the run holds a completed ``agent_task`` of a reviewer member (§4.8): the
    chief delegated the inspection and got the reviewer's result."""
    events = schema.assistant_run_events
    payloads = conn.execute(select(events.c.payload).where(
        events.c.run_id == run_id, events.c.event == "agent_task")).scalars()
    return any(isinstance(p, dict) and p.get("agent_type") == "reviewer"
               and p.get("kind") == "cps" and p.get("status") == "completed" for p in payloads)


def review_attempt_of_run(conn: Connection, run_id: str) -> AttemptRow | None:
    found = conn.execute(select(ATTEMPTS).where(ATTEMPTS.c.advanced_chat_run_id == run_id,
                                                ATTEMPTS.c.kind == "review",
                                                ATTEMPTS.c.status == "executing")
                         ).mappings().first()
    return row_of(AttemptRow, found) if found is not None else None


def record_decision(conn: Connection, run_id: str, decision: str, summary: str,
                    reviewer_delegated: bool, now: datetime) -> str:
    """``studio_review_work``: refused (400) without a reviewer ``agent_task`` in the run;
    ``verified`` → attempt and item ``verified`` and the item's artifacts accepted;
    ``needs_revision`` → attempt ``retryable_failure``, item ``queued``; ``blocked`` → both
    ``blocked``.  Returns the item's new status."""
    if decision not in DECISIONS:
        raise invalid(BAD_DECISION)
    if not reviewer_delegated:
        raise invalid(NEEDS_REVIEWER)
    found = review_attempt_of_run(conn, run_id)
    if found is None:
        raise conflict(NOT_REVIEWING)
    attempt_status = {"verified": "verified", "needs_revision": "retryable_failure",
                      "blocked": "blocked"}[decision]
    item_status = {"verified": "verified", "needs_revision": "queued",
                   "blocked": "blocked"}[decision]
    set_attempt(conn, found.id, now, status=attempt_status, finished_at=now,
                 result_summary=summary[:MAX_SUMMARY])
    set_item(conn, found.work_item_id, "executing", now, status=item_status)
    if decision == "verified":
        conn.execute(update(ARTIFACTS).where(ARTIFACTS.c.work_item_id == found.work_item_id)
                     .values(acceptance_state="verified"))
    audit.record(conn, found.personal_company_id, f"review_attempt.{decision}", now,
                 actor_type="chief", work_item_id=found.work_item_id,
                 payload={"attempt_id": found.id, "run_id": run_id, "summary": summary[:500]})
    return item_status


def review_run_ended(conn: Connection, attempt_id: int, run_status: str, run_error: str,
                     now: datetime, *, run_id: str = "", cost_nanos: int = 0) -> bool:
    """The review run ended while its attempt still executes: no decision was recorded, so
    attempt and item are ``blocked``, audit ``review_attempt.blocked``; the run's cost is the
    attempt's and is added to the item's consumed cost (ledger ``consumption``)."""
    reason = NO_DECISION if run_status == "completed" else \
        f"Review run did not complete: {run_error or run_status}"
    found = row_of(AttemptRow, conn.execute(select(ATTEMPTS).where(ATTEMPTS.c.id == attempt_id))
                   .mappings().one())
    if not set_attempt(conn, attempt_id, now, status="blocked", finished_at=now,
                       result_summary=reason, cost_nanos=cost_nanos):
        return False
    set_item(conn, found.work_item_id, "executing", now, status="blocked",
             consumed_cost_nanos=ITEMS.c.consumed_cost_nanos + cost_nanos)
    if cost_nanos > 0:
        add_ledger(conn, found.personal_company_id, found.work_item_id, "consumption",
                   cost_nanos, f"run:{run_id}", now)
    audit.record(conn, found.personal_company_id, "review_attempt.blocked", now,
                 actor_type="system", work_item_id=found.work_item_id,
                 payload={"attempt_id": attempt_id, "reason": reason})
    return True


__all__ = ["DECISIONS", "record_decision", "review_run_ended", "reviewer_consulted"]
