"""The control loop's writes (agents contract §4.8, §4.10, §4.11, [P-34], [P-35]).

Each function is one step of a tick for one studio and runs inside the caller's transaction,
so a step either happens whole (item, attempt, ledger and audit together) or not at all.  Item
and attempt changes are conditional on the status the step expects: a pause, a cancel or
another node that got there first makes the step a no-op instead of a double transition.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import orjson
from sqlalchemy import and_, func, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.studio import audit, signals
from gateway.store.studio.rows import AttemptRow, CompanyRow, WorkItemRow, row_of
from gateway.studio.budgets import refusal

COMPANIES = schema.studio_companies
ITEMS = schema.studio_work_items
ATTEMPTS = schema.studio_work_attempts
LEDGER = schema.studio_budget_ledger
SIGNALS = schema.studio_signals
ARTIFACTS = schema.studio_artifacts
AUDIT = schema.studio_audit_events

#: an attempt's lease (§4.8)
LEASE = timedelta(minutes=10)
#: [P-35] renew a live run's lease when less than this is left (i.e. about every 60 s)
RENEW_BELOW = LEASE - timedelta(seconds=60)
MAX_TRIAGE = 100
MAX_SUMMARY = 4000
NOT_OPERATING = "Personal Company is not operating"
NOT_READY = "Work item is no longer ready to start"
FLOOR_REACHED = "Owner balance is at or below the Personal Company balance floor"


def operating_companies(conn: Connection) -> list[CompanyRow]:
    rows = conn.execute(select(COMPANIES).where(COMPANIES.c.state == "operating")
                        .order_by(COMPANIES.c.id)).mappings()
    return [row_of(CompanyRow, r) for r in rows]


def company(conn: Connection, company_id: int) -> CompanyRow:
    return row_of(CompanyRow, conn.execute(select(COMPANIES).where(COMPANIES.c.id == company_id))
                  .mappings().one())


def item(conn: Connection, item_id: int) -> WorkItemRow:
    return row_of(WorkItemRow, conn.execute(select(ITEMS).where(ITEMS.c.id == item_id))
                  .mappings().one())


def attempt(conn: Connection, attempt_id: int) -> AttemptRow:
    return row_of(AttemptRow, conn.execute(select(ATTEMPTS).where(ATTEMPTS.c.id == attempt_id))
                  .mappings().one())


def executing_attempts(conn: Connection, company_id: int) -> list[AttemptRow]:
    rows = conn.execute(select(ATTEMPTS).where(ATTEMPTS.c.personal_company_id == company_id,
                                               ATTEMPTS.c.status == "executing")
                        .order_by(ATTEMPTS.c.id)).mappings()
    return [row_of(AttemptRow, r) for r in rows]


def attempt_of_run(conn: Connection, run_id: str) -> AttemptRow | None:
    """The attempt a run was made for (None: not a studio run)."""
    if not run_id:
        return None
    found = conn.execute(select(ATTEMPTS).where(ATTEMPTS.c.advanced_chat_run_id == run_id)
                         .limit(1)).mappings().first()
    return row_of(AttemptRow, found) if found is not None else None


#: attempts that ended before their run did: a review decided by the tool, an attempt
#: interrupted by a pause or a cancel, a lease that expired
ENDED_BEFORE_RUN = ("verified", "retryable_failure", "blocked", "cancelled", "dead_letter")


def ended_without_cost(conn: Connection, company_id: int, since: datetime) -> list[AttemptRow]:
    """Attempts that ended since ``since`` with a run whose cost is not recorded yet (the run
    may still be finishing its last step)."""
    rows = conn.execute(select(ATTEMPTS).where(
        ATTEMPTS.c.personal_company_id == company_id,
        ATTEMPTS.c.status.in_(ENDED_BEFORE_RUN), ATTEMPTS.c.cost_nanos == 0,
        ATTEMPTS.c.advanced_chat_run_id != "", ATTEMPTS.c.finished_at >= since)
        .order_by(ATTEMPTS.c.id)).mappings()
    return [row_of(AttemptRow, r) for r in rows]


def add_run_cost(conn: Connection, attempt_id: int, run_id: str, cost_nanos: int,
                 now: datetime) -> bool:
    """An attempt that ended before its run (a review decided by the tool, a pause, a cancel,
    an expired lease): once the run ended, its final cost becomes the attempt's and is added
    to the item's consumed cost (ledger ``consumption``), once ([P-42])."""
    if cost_nanos <= 0:
        return False
    if not conn.execute(update(ATTEMPTS).where(
            ATTEMPTS.c.id == attempt_id, ATTEMPTS.c.status.in_(ENDED_BEFORE_RUN),
            ATTEMPTS.c.cost_nanos == 0).values(cost_nanos=cost_nanos, updated_at=now)
            ).rowcount:
        return False
    found = attempt(conn, attempt_id)
    conn.execute(update(ITEMS).where(ITEMS.c.id == found.work_item_id).values(
        consumed_cost_nanos=ITEMS.c.consumed_cost_nanos + cost_nanos, updated_at=now))
    add_ledger(conn, found.personal_company_id, found.work_item_id, "consumption", cost_nanos,
               f"run:{run_id}", now)
    return True


def set_item(conn: Connection, item_id: int, from_status: str, now: datetime,
              **values: object) -> bool:
    return bool(conn.execute(update(ITEMS).where(ITEMS.c.id == item_id,
                                                 ITEMS.c.status == from_status)
                             .values(**values, updated_at=now)).rowcount)


def set_attempt(conn: Connection, attempt_id: int, now: datetime, **values: object) -> bool:
    return bool(conn.execute(update(ATTEMPTS).where(ATTEMPTS.c.id == attempt_id,
                                                    ATTEMPTS.c.status == "executing")
                             .values(**values, updated_at=now)).rowcount)


# --- step 1: leases --------------------------------------------------------------------------

def renew_lease(conn: Connection, attempt_id: int, now: datetime) -> bool:
    """[P-35]: the linked run still lives, so the attempt's lease runs 10 minutes from now."""
    return set_attempt(conn, attempt_id, now, lease_expires_at=now + LEASE)


def recover_expired(conn: Connection, company_id: int, now: datetime) -> list[AttemptRow]:
    """§4.8 step 1: every executing attempt whose lease ran out becomes ``retryable_failure``
    (item back to ``queued``) or, past 2 attempts, ``dead_letter`` (both); audit
    ``work_attempt.lease_expired``.  Returns the attempts recovered (their runs are to stop)."""
    expired = [a for a in executing_attempts(conn, company_id)
               if a.lease_expires_at is not None and a.lease_expires_at < now]
    recovered = []
    for found in expired:
        attempts = int(conn.execute(select(func.count()).where(
            ATTEMPTS.c.work_item_id == found.work_item_id)).scalar() or 0)
        dead = attempts > 2
        status = "dead_letter" if dead else "retryable_failure"
        if not set_attempt(conn, found.id, now, status=status, finished_at=now,
                            result_summary="Attempt lease expired"):
            continue
        set_item(conn, found.work_item_id, "executing", now,
                  status="dead_letter" if dead else "queued")
        audit.record(conn, company_id, "work_attempt.lease_expired", now, actor_type="system",
                     work_item_id=found.work_item_id,
                     payload={"attempt_id": found.id, "run_id": found.advanced_chat_run_id,
                              "status": status})
        recovered.append(found)
    return recovered


# --- step 2: signals -------------------------------------------------------------------------

def triage_signals(conn: Connection, company_id: int, now: datetime) -> int:
    """§4.8 step 2: up to 100 ``inbox`` signals become ``triaged`` (audit
    ``chief.signal_received`` each)."""
    rows = conn.execute(select(SIGNALS.c.id, SIGNALS.c.kind, SIGNALS.c.work_item_id).where(
        SIGNALS.c.personal_company_id == company_id, SIGNALS.c.status == "inbox")
        .order_by(SIGNALS.c.id).limit(MAX_TRIAGE)).all()
    for signal_id, kind, work_item_id in rows:
        conn.execute(update(SIGNALS).where(SIGNALS.c.id == signal_id)
                     .values(status="triaged", triaged_at=now))
        audit.record(conn, company_id, "chief.signal_received", now, actor_type="chief",
                     work_item_id=work_item_id, payload={"signal_id": signal_id, "kind": kind})
    return len(rows)


# --- step 4: delivery ------------------------------------------------------------------------

def deliver_oldest_verified(conn: Connection, company_id: int, now: datetime) -> int | None:
    """§4.8 step 4: the oldest ``verified`` item becomes ``delivered``; its id, or None."""
    found = conn.execute(select(ITEMS.c.id).where(ITEMS.c.personal_company_id == company_id,
                                                  ITEMS.c.status == "verified")
                         .order_by(ITEMS.c.updated_at, ITEMS.c.id).limit(1)).scalar()
    if found is None or not set_item(conn, int(found), "verified", now, status="delivered"):
        return None
    audit.record(conn, company_id, "work_item.delivered", now, actor_type="system",
                 work_item_id=int(found))
    return int(found)


# --- step 5: candidates and starts -----------------------------------------------------------

def next_candidate(conn: Connection, company_id: int, skip: set[int]) -> WorkItemRow | None:
    """Highest priority, then oldest: an ``awaiting_review`` item first, else a ``queued`` one
    ([P-33]: never an ``r4`` item).  ``skip`` holds items already tried this tick."""
    for status in ("awaiting_review", "queued"):
        query = select(ITEMS).where(ITEMS.c.personal_company_id == company_id,
                                    ITEMS.c.status == status, ITEMS.c.risk_level != "r4")
        if skip:
            query = query.where(ITEMS.c.id.notin_(sorted(skip)))
        found = conn.execute(query.order_by(ITEMS.c.priority.desc(), ITEMS.c.created_at,
                                            ITEMS.c.id).limit(1)).mappings().first()
        if found is not None:
            return row_of(WorkItemRow, found)
    return None


def owner_balance(conn: Connection, user_id: int) -> int:
    u = schema.users
    return int(conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)).scalar() or 0)


def check_floor(conn: Connection, company_id: int, now: datetime) -> bool:
    """§4.11: True (and the studio is now ``attention_required``, ``paused_at=now``, outbox
    and audit ``balance.floor_reached``) when the owner's balance is at or below the floor."""
    record = company(conn, company_id)
    balance = owner_balance(conn, record.owner_user_id)
    if balance > record.balance_floor_nanos:
        return False
    moved = conn.execute(update(COMPANIES).where(COMPANIES.c.id == company_id,
                                                 COMPANIES.c.state == "operating")
                         .values(state="attention_required", paused_at=now,
                                 updated_at=now)).rowcount
    if moved:
        payload = {"balance_nanos": balance, "floor_nanos": record.balance_floor_nanos}
        signals.post_once(conn, company_id, "balance.floor_reached", "balance.floor_reached",
                          now, payload)
        audit.record(conn, company_id, "balance.floor_reached", now, actor_type="system",
                     payload=payload)
    return True


@dataclass(frozen=True)
class Leased:
    item: WorkItemRow
    attempt: AttemptRow


def lease(conn: Connection, company_id: int, work_item_id: int, kind: str, token: str,
          now: datetime) -> Leased | str:
    """§4.8 (a), (b), (d): re-read the state (not operating → refusal), the balance floor
    (→ ``attention_required``, committed, and a refusal), then item → ``executing`` and attempt
    ``n+1`` of ``kind`` with a 10-minute lease; audit ``work_attempt.leased``.  A refusal is
    returned, not raised, so the floor's state change commits with the transaction."""
    if company(conn, company_id).state != "operating":
        return NOT_OPERATING
    if check_floor(conn, company_id, now):
        return FLOOR_REACHED
    current = item(conn, work_item_id)
    expected = "awaiting_review" if kind == "review" else "queued"
    if current.risk_level == "r4" or not set_item(conn, current.id, expected, now,
                                                  status="executing"):
        return NOT_READY
    number = int(conn.execute(select(func.max(ATTEMPTS.c.attempt_number)).where(
        ATTEMPTS.c.work_item_id == current.id)).scalar() or 0) + 1
    key = conn.execute(ATTEMPTS.insert().values(
        work_item_id=current.id, personal_company_id=company_id, attempt_number=number,
        kind=kind, status="executing", lease_token=token, lease_expires_at=now + LEASE,
        started_at=now, input_snapshot=current.input_snapshot, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert key is not None
    audit.record(conn, company_id, "work_attempt.leased", now, actor_type="system",
                 work_item_id=current.id,
                 payload={"attempt_id": int(key[0]), "attempt_number": number, "kind": kind})
    return Leased(current, attempt(conn, int(key[0])))


def link_run(conn: Connection, attempt_id: int, run_id: str, now: datetime) -> bool:
    """§4.8 (f): the attempt's internal run (False: the attempt was interrupted meanwhile)."""
    return set_attempt(conn, attempt_id, now, advanced_chat_run_id=run_id)


def start_failed(conn: Connection, leased: Leased, error: str, now: datetime) -> None:
    """§4.8 (e): attempt ``retryable_failure``, item back where it was; audit
    ``work_attempt.start_failed`` only the first time this item fails with this error
    ([P-34]) so a broken runtime does not write one event per tick."""
    back = "awaiting_review" if leased.attempt.kind == "review" else "queued"
    set_attempt(conn, leased.attempt.id, now, status="retryable_failure", finished_at=now,
                 result_summary=error[:MAX_SUMMARY])
    set_item(conn, leased.item.id, "executing", now, status=back)
    record_start_failure(conn, leased.item, error, now)


def record_start_failure(conn: Connection, work_item: WorkItemRow, error: str,
                         now: datetime) -> bool:
    """[P-34]: audit ``work_attempt.start_failed {"error"}`` once per item per distinct error."""
    payload = orjson.dumps({"error": error}).decode("utf-8")
    seen = conn.execute(select(AUDIT.c.id).where(
        AUDIT.c.personal_company_id == work_item.personal_company_id,
        AUDIT.c.work_item_id == work_item.id, AUDIT.c.event_type == "work_attempt.start_failed",
        AUDIT.c.payload == payload).limit(1)).first()
    if seen is not None:
        return False
    audit.record(conn, work_item.personal_company_id, "work_attempt.start_failed", now,
                 actor_type="system", work_item_id=work_item.id, payload={"error": error})
    return True


def failed_before(conn: Connection, work_item: WorkItemRow) -> set[str]:
    """The start errors already recorded for this item ([P-34])."""
    rows = conn.execute(select(AUDIT.c.payload).where(
        AUDIT.c.personal_company_id == work_item.personal_company_id,
        AUDIT.c.work_item_id == work_item.id,
        AUDIT.c.event_type == "work_attempt.start_failed")).scalars()
    return {str(orjson.loads(p).get("error", "")) for p in rows}


# --- execution finished ----------------------------------------------------------------------

def finish_execution(conn: Connection, attempt_id: int, *, completed: bool, summary: str,
                     run_id: str, cost_nanos: int, now: datetime) -> bool:
    """§4.8 execution finished: attempt and item ``awaiting_review`` (with the result artifact)
    or ``blocked``; cost = the run's cost, ledger ``consumption`` (>0) and ``release`` of the
    reservation, balance-floor check, audit ``work_attempt.completed``.  False: the attempt was
    no longer executing (paused, cancelled, recovered), so nothing is written."""
    found = attempt(conn, attempt_id)
    status = "awaiting_review" if completed else "blocked"
    if not set_attempt(conn, attempt_id, now, status=status, finished_at=now,
                        result_summary=summary[:MAX_SUMMARY], cost_nanos=cost_nanos):
        return False
    work = item(conn, found.work_item_id)
    company_id = found.personal_company_id
    set_item(conn, work.id, "executing", now, status=status,
              consumed_cost_nanos=ITEMS.c.consumed_cost_nanos + cost_nanos,
              reserved_cost_nanos=0)
    if completed:
        conn.execute(ARTIFACTS.insert().values(
            work_item_id=work.id, work_attempt_id=attempt_id, kind="advanced_chat_result",
            uri=f"advanced-chat://runs/{run_id}", source="chief",
            content_hash=hashlib.sha256(summary.encode("utf-8")).hexdigest(),
            acceptance_state="pending", created_at=now))
    if cost_nanos > 0:
        add_ledger(conn, company_id, work.id, "consumption", cost_nanos, f"run:{run_id}", now)
    if work.reserved_cost_nanos > 0:
        add_ledger(conn, company_id, work.id, "release", -work.reserved_cost_nanos,
                f"attempt:{attempt_id}", now)
    audit.record(conn, company_id, "work_attempt.completed", now, actor_type="system",
                 work_item_id=work.id,
                 payload={"attempt_id": attempt_id, "run_id": run_id, "status": status})
    check_floor(conn, company_id, now)
    return True


def add_ledger(conn: Connection, company_id: int, work_item_id: int, entry: str, amount: int,
            reference: str, now: datetime) -> None:
    conn.execute(LEDGER.insert().values(personal_company_id=company_id, work_item_id=work_item_id,
                                        entry_type=entry, amount_nanos=amount,
                                        reference=reference, created_at=now))


def utc_day_start(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    return datetime(now.year, now.month, now.day, tzinfo=UTC)


def utc_month_start(now: datetime) -> datetime:
    now = now.astimezone(UTC)
    return datetime(now.year, now.month, 1, tzinfo=UTC)


def outstanding_since(conn: Connection, company_id: int, since: datetime) -> int:
    """§4.11: Σ(reservation + release) since ``since`` (consumption does not count)."""
    return int(conn.execute(select(func.coalesce(func.sum(LEDGER.c.amount_nanos), 0)).where(
        and_(LEDGER.c.personal_company_id == company_id, LEDGER.c.created_at >= since,
             LEDGER.c.entry_type.in_(("reservation", "release"))))).scalar() or 0)


def check_budget(conn: Connection, record: CompanyRow, estimated_nanos: int,
                 now: datetime) -> str | None:
    """§4.11 at work creation: the 402 message when ``estimated_nanos`` does not fit the
    studio's daily/monthly budgets (UTC periods), else None."""
    return refusal(estimated_nanos, record.daily_budget_nanos, record.monthly_budget_nanos,
                   outstanding_since(conn, record.id, utc_day_start(now)),
                   outstanding_since(conn, record.id, utc_month_start(now)))


def run_final_text(conn: Connection, run_id: str) -> str:
    """A finished run's final assistant text: the message of its ``done`` event."""
    events = schema.assistant_run_events
    payload = conn.execute(select(events.c.payload).where(
        events.c.run_id == run_id, events.c.event == "done").order_by(events.c.seq.desc())
        .limit(1)).scalar()
    if not isinstance(payload, dict):
        return ""
    message = payload.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""
