"""Task rows and their money, each step one transaction (run through ``DBRunner.transaction``).

Money design (survives restarts, concurrent pollers and duplicate upstream notices):

- Submit: the full price is reserved in memory first (402 with no upstream call), the upstream
  is called, and only once it accepted the job does ``create`` run -- ONE transaction that
  charges the price through the settler's own ``write_batch`` (``charge`` ledger row and usage
  row, ref = our task id; subscription quota first, like every request) and inserts the task
  row with ``billing_state = 'held'``.  An upstream that refused (5xx, 4xx, transport error)
  therefore costs nothing and leaves no money trace.
- End: ``finish`` moves ``billing_state`` out of ``held`` with a conditional UPDATE (``WHERE
  billing_state = 'held'``); only the one transaction whose UPDATE matched may act.  Success
  keeps the charge (``settled``); failure / cancel / expiry refunds the wallet part of the
  charge (``refunded``: a ``task_refund`` ledger row, ref = task id, the balance credited and
  the key's spent counter lowered).  The ledger's unique ``(kind, ref)`` makes a second refund
  impossible even if two databases clients raced past the UPDATE.
- Pollers lease tasks (``lease_owner`` / ``lease_until``) with one conditional UPDATE per claim
  round, so each due task goes to exactly one process; a crashed poller's lease simply expires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Connection

from gateway.store import schema
from gateway.store.billing_writes import write_batch
from gateway.v1.tasks.status import REFUNDED, SUCCEEDED, TERMINAL

TASK_REFUND = "task_refund"
HELD = "held"
SETTLED = "settled"
REFUNDED_STATE = "refunded"

t = schema.tasks


@dataclass(frozen=True)
class TaskEnd:
    """What leaving ``held`` did: whose money, how much went back, and the final status."""

    user_id: int
    api_key_id: int | None
    refunded_nanos: int
    status: str
    #: the charge was kept (the task succeeded)
    settled: bool


def create(conn: Connection, task: Mapping[str, Any], charge: Mapping[str, Any],
           now: datetime) -> dict[str, Any]:
    """Charge the held price and store the task, together; returns the charge result."""
    result = write_batch(conn, [charge], now)[0]
    row = dict(task)
    row.update(charged_nanos=result["charged_nanos"],
               subscription_nanos=int(result.get("subscription_nanos") or 0),
               billing_state=HELD, created_at=now, updated_at=now)
    conn.execute(t.insert().values(**row))
    if row["status"] in TERMINAL:
        finish(conn, row["id"], row["status"], None, now)
    return result


def load(conn: Connection, task_id: str, user_id: int | None = None) -> dict[str, Any] | None:
    """A task by our id; with ``user_id`` only the owner's (others see None, like a miss)."""
    query = select(t).where(t.c.id == task_id)
    if user_id is not None:
        query = query.where(t.c.user_id == user_id)
    row = conn.execute(query).mappings().first()
    return dict(row) if row is not None else None


def claim_due(conn: Connection, owner: str, now: datetime, lease: float,
              limit: int) -> list[dict[str, Any]]:
    """Lease up to ``limit`` due open tasks to ``owner`` (a token unique to this round)."""
    free = or_(t.c.lease_until.is_(None), t.c.lease_until < now)
    due = and_(t.c.status.notin_(sorted(TERMINAL)), t.c.status_path != "",
               or_(t.c.next_poll_at <= now, t.c.expires_at <= now), free)
    ids = [r[0] for r in conn.execute(
        select(t.c.id).where(due).order_by(t.c.next_poll_at).limit(limit)
        .with_for_update(skip_locked=True))]  # PostgreSQL: another node's claim is skipped
    if not ids:
        return []
    conn.execute(update(t).where(t.c.id.in_(ids), due).values(
        lease_owner=owner, lease_until=now + timedelta(seconds=lease)))
    return [dict(r) for r in conn.execute(
        select(t).where(t.c.lease_owner == owner, t.c.id.in_(ids))).mappings()]


def record_poll(conn: Connection, task_id: str, owner: str, values: Mapping[str, Any],
                now: datetime) -> TaskEnd | None:
    """Store a poll outcome if ``owner`` still holds the lease; finish a terminal task."""
    changed = conn.execute(update(t).where(
        t.c.id == task_id, t.c.lease_owner == owner, t.c.status.notin_(sorted(TERMINAL))
    ).values(**values, lease_owner=None, lease_until=None, updated_at=now)).rowcount
    if not changed:
        return None
    status = values.get("status")
    if status in TERMINAL:
        return finish(conn, task_id, str(status), None, now)
    return None


def finish(conn: Connection, task_id: str, status: str, error: str | None,
           now: datetime) -> TaskEnd | None:
    """Leave ``held`` exactly once: keep the charge or refund it.  Returns what was done, or
    None when already finished."""
    values: dict[str, Any] = {"status": status, "completed_at": now, "updated_at": now}
    if error is not None:
        values["error"] = error
    target = REFUNDED_STATE if status in REFUNDED else SETTLED
    changed = conn.execute(update(t).where(t.c.id == task_id, t.c.billing_state == HELD)
                           .values(**values, billing_state=target)).rowcount
    if not changed:
        return None
    row = conn.execute(select(t.c.user_id, t.c.api_key_id, t.c.charged_nanos,
                              t.c.subscription_nanos).where(t.c.id == task_id)).one()
    user_id, key_id = int(row[0]), row[1]
    amount = max(0, int(row[2]) - int(row[3])) if target == REFUNDED_STATE else 0
    if amount:
        _refund(conn, task_id, user_id, key_id, amount, now)
        conn.execute(update(t).where(t.c.id == task_id).values(refunded_nanos=amount))
    return TaskEnd(user_id=user_id, api_key_id=key_id, refunded_nanos=amount, status=status,
                   settled=status == SUCCEEDED)


def _refund(conn: Connection, task_id: str, user_id: int, key_id: int | None, amount: int,
            now: datetime) -> None:
    u, k = schema.users, schema.api_keys
    balance = conn.execute(select(u.c.balance_nanos).where(u.c.id == user_id)
                           .with_for_update()).scalar()
    if balance is None:
        return
    after = int(balance) + amount
    conn.execute(schema.ledger.insert().values(
        user_id=user_id, kind=TASK_REFUND, amount_nanos=amount, balance_after_nanos=after,
        actor_user_id=None, ref=task_id, memo="task refund", created_at=now))
    conn.execute(update(u).where(u.c.id == user_id).values(balance_nanos=after))
    if key_id is not None:
        spent = conn.execute(select(k.c.spent_nanos).where(k.c.id == key_id)
                             .with_for_update()).scalar()
        if spent is not None:
            conn.execute(update(k).where(k.c.id == key_id)
                         .values(spent_nanos=max(0, int(spent) - amount)))


def release(conn: Connection, task_id: str, owner: str, next_poll_at: datetime,
            errors_seen: int, now: datetime) -> None:
    """A poll that learned nothing: give the lease back and come again later."""
    conn.execute(update(t).where(t.c.id == task_id, t.c.lease_owner == owner).values(
        lease_owner=None, lease_until=None, next_poll_at=next_poll_at,
        poll_errors=errors_seen, poll_attempts=t.c.poll_attempts + 1, updated_at=now))


def nudge(conn: Connection, task_id: str, now: datetime, min_gap: float = 1.0) -> None:
    """Make an open task due now (a client asked about it) -- but never while its polls are
    backing off, nor within ``min_gap`` seconds of the last poll, so clients asking often
    cannot turn into an upstream flood."""
    conn.execute(update(t).where(
        t.c.id == task_id, t.c.status.notin_(sorted(TERMINAL)), t.c.next_poll_at > now,
        t.c.poll_errors == 0, t.c.updated_at <= now - timedelta(seconds=min_gap),
    ).values(next_poll_at=now))
